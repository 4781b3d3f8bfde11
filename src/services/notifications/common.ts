import type { ProviderKind } from "../../domain/notification/events.ts";
import { InvalidArgumentError, NotFoundError } from "../../errors.ts";
import type { ProviderSearchFilter } from "../../gen/platform/resources/notification/v3alpha/provider_pb.ts";
import type { OutboundGuard } from "../../net/outbound.ts";
import { getProvider, type ProviderFilter, type ProviderRow } from "../../query/notification-providers.ts";
import type { Queryable } from "../../storage/database.ts";
import { resourceDetails } from "../mapping.ts";

/** `details` of a provider: its version, owned by the instance. */
export function providerDetails(
  version: { id: string; sequence: number; changeDate?: Date },
  instanceId: string,
) {
  return resourceDetails({ ...version, owner: { type: 2, id: instanceId } });
}

export function rowDetails(row: ProviderRow, instanceId: string) {
  return providerDetails(
    { id: row.id, sequence: Number(row.sequence), changeDate: row.changed_at },
    instanceId,
  );
}

/** The provider `id` of `kind`; NOT_FOUND otherwise. */
export async function requireProvider(
  db: Queryable,
  instanceId: string,
  kind: ProviderKind,
  id: string,
): Promise<ProviderRow> {
  const row = await getProvider(db, instanceId, kind, id);
  if (!row) throw new NotFoundError(`${kind === "smtp" ? "SMTP" : "SMS"} provider ${id} not found`);
  return row;
}

/**
 * A host as configured may not be reached at all (an always-refused IP literal such as a link-local or
 * metadata address, or a name or address of PLATFORM_EXECUTION_DENY_LIST): INVALID_ARGUMENT naming
 * `field`, before anything is stored. Names are checked again, address by address, at every connection.
 */
export function requireReachable(guard: OutboundGuard, host: string, field: string): void {
  const refusal = guard.refusalOfHost(host);
  if (refusal) throw new InvalidArgumentError(refusal, field);
}

export function toFilters(filters: ProviderSearchFilter[]): ProviderFilter[] {
  return filters.map((f) => {
    switch (f.filter.case) {
      case "id":
        return { id: f.filter.value.id };
      case "description":
        return { description: f.filter.value.description, method: f.filter.value.method };
      case "state":
        return { state: f.filter.value.state };
      default:
        throw new InvalidArgumentError("one of id, description, state must be set", "filters");
    }
  });
}
