import { NotFoundError, PermissionDeniedError } from "../errors.ts";
import type { InstanceDirectory } from "../query/instances.ts";
import type { Queryable } from "../storage/database.ts";
import type { Caller, ResolvedContext } from "./caller.ts";

/** RequestContext of the API, as plain data (the service layer maps the proto message to it). */
export type ContextSelector =
  | { system: true }
  | { instanceId: string }
  | { instanceDomain: string }
  | { orgId: string }
  | { orgDomain: string }
  | Record<string, never>;

/**
 * Resolves the `ctx` of a request. Default: the instance of the Host header. A caller that is not a
 * system user stays inside the Host's instance: naming another instance is NOT_FOUND, as is an
 * organization the instance does not have.
 */
export async function resolveContext(
  db: Queryable,
  instances: InstanceDirectory,
  caller: Caller,
  hostInstanceId: string | undefined,
  selector: ContextSelector | undefined,
): Promise<ResolvedContext> {
  const sel = (selector ?? {}) as Partial<
    Record<"system" | "instanceId" | "instanceDomain" | "orgId" | "orgDomain", unknown>
  >;
  if (sel.system) {
    if (caller.kind !== "system")
      throw new PermissionDeniedError("only system users may act in the system context");
    return { type: "system" };
  }
  if (typeof sel.instanceId === "string" || typeof sel.instanceDomain === "string") {
    const instance =
      typeof sel.instanceId === "string"
        ? await instances.byId(sel.instanceId)
        : await instances.byHost(String(sel.instanceDomain));
    if (!instance || (caller.kind !== "system" && instance.id !== hostInstanceId))
      throw new NotFoundError("instance not found");
    return { type: "instance", instanceId: instance.id };
  }
  if (!hostInstanceId) throw new NotFoundError("instance not found");
  if (typeof sel.orgId === "string") {
    const rows = await db.query("SELECT 1 FROM orgs WHERE instance_id = $1 AND id = $2", [
      hostInstanceId,
      sel.orgId,
    ]);
    if (rows.length === 0) throw new NotFoundError("organization not found");
    return { type: "org", instanceId: hostInstanceId, orgId: sel.orgId };
  }
  if (typeof sel.orgDomain === "string") {
    const rows = await db.query<{ org_id: string }>(
      "SELECT org_id FROM org_domains WHERE instance_id = $1 AND domain = $2 AND is_verified",
      [hostInstanceId, sel.orgDomain.toLowerCase()],
    );
    if (rows.length === 0) throw new NotFoundError("organization not found");
    return { type: "org", instanceId: hostInstanceId, orgId: rows[0].org_id };
  }
  return { type: "instance", instanceId: hostInstanceId };
}
