/** SearchUsers: the users of an instance or organization the caller may read, by filters, in pages. */
import type { ServiceImpl } from "@connectrpc/connect";
import { USER } from "../../domain/user/events.ts";
import { usernameKey } from "../../domain/user/username.ts";
import { InvalidArgumentError } from "../../errors.ts";
import {
  type PlatformUsers,
  UserFieldName,
  type UserSearchFilter,
} from "../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import { search, TextMethod, toPage, Where } from "../../query/search.ts";
import { authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails } from "../mapping.ts";
import { roleOn, visibleData } from "./custom-data.ts";
import { readMetadata, toUser, USER_COLUMNS, USER_FROM, type UserRow } from "./read.ts";

const sortColumns: Record<number, string> = {
  [UserFieldName.UNSPECIFIED]: "u.created_at",
  [UserFieldName.ID]: "u.id",
  [UserFieldName.CREATION_DATE]: "u.created_at",
  [UserFieldName.CHANGE_DATE]: "u.changed_at",
  [UserFieldName.USERNAME]: "u.username_key",
  [UserFieldName.EMAIL]: "lower(u.email)",
  [UserFieldName.STATE]: "u.state",
  [UserFieldName.TYPE]: "u.type",
};

/** The ignore-case text methods → the same comparison on the username's key. */
const foldedTextMethod: Record<number, number> = {
  [TextMethod.equalsIgnoreCase]: TextMethod.equals,
  [TextMethod.startsWithIgnoreCase]: TextMethod.startsWith,
  [TextMethod.containsIgnoreCase]: TextMethod.contains,
  [TextMethod.endsWithIgnoreCase]: TextMethod.endsWith,
};

function filterWhere(where: Where, filter: UserSearchFilter, instanceId: string, index: number): void {
  const f = filter.filter;
  switch (f.case) {
    case "username": {
      // ignoring case means as usernames compare: by their keys (normalized, case folded)
      const folded = foldedTextMethod[f.value.method];
      if (folded === undefined) where.text("u.username", f.value.method, f.value.username);
      else where.text("u.username_key", folded, usernameKey(f.value.username));
      return;
    }
    case "email":
      where.text("u.email", f.value.method, f.value.address, { lowerIndexed: true });
      return;
    case "state":
      where.and((p) => `u.state = ${p(f.value.state)}`);
      return;
    case "type":
      where.and((p) => `u.type = ${p(f.value.type)}`);
      return;
    case "ids":
      where.in("u.id", f.value.ids);
      return;
    case "schemaId":
      where.and((p) => `u.schema_id = ${p(f.value.schemaId)}`);
      return;
    case "org": {
      const org = f.value.property;
      if (org.case === "orgId") where.and((p) => `u.org_id = ${p(org.value)}`);
      else if (org.case === "orgDomain")
        where.and(
          (p) =>
            `u.org_id IN (SELECT org_id FROM org_domains WHERE instance_id = ${p(instanceId)} AND domain = lower(${p(org.value)}))`,
        );
      else throw new InvalidArgumentError("one of org_id, org_domain must be set", `filters[${index}].org`);
      return;
    }
  }
}

export function userSearchRpcs(deps: ServiceDeps): Pick<ServiceImpl<typeof PlatformUsers>, "searchUsers"> {
  return {
    async searchUsers(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", { ctx: req.ctx });
      if (call.context.type === "system")
        throw new InvalidArgumentError("users are searched in an instance or organization", "ctx");
      const instanceId = call.context.instanceId;
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const where = new Where().and((p) => `u.instance_id = ${p(instanceId)}`);
      const orgId = call.context.type === "instance" ? "" : call.context.orgId;
      if (orgId) where.and((p) => `u.org_id = ${p(orgId)}`);
      const readable = await deps.authorizer.orgsWith(call.caller, "user.read", instanceId);
      if (readable !== "all") where.in("u.org_id", [...readable]);
      for (const [i, filter] of req.filters.entries()) filterWhere(where, filter, instanceId, i);
      const result = await search<UserRow>(deps.db, {
        select: USER_COLUMNS,
        from: USER_FROM,
        where,
        orderBy: sortColumns[req.sortingColumn] ?? "u.created_at",
        tiebreak: "u.id",
        page,
        instanceId,
        aggregateTypes: [USER],
        table: { from: "users u", alias: "u" },
        counted:
          readable === "all" && req.filters.length === 0 ? { resource: "users", scope: orgId } : undefined,
      });
      const metadata = await readMetadata(
        deps.db,
        instanceId,
        result.rows.map((r) => r.id),
      );
      const data = await visibleData(deps.db, instanceId, result.rows, (row) => roleOn(call.caller, row.id));
      return {
        details: listDetails(result),
        result: result.rows.map((r) => toUser(r, metadata.get(r.id), data.get(r.id))),
      };
    },
  };
}
