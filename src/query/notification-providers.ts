import { aggregateOf, type ProviderConfig, type ProviderKind } from "../domain/notification/events.ts";
import type { Queryable } from "../storage/database.ts";
import { type Page, type SearchResult, search, Where } from "./search.ts";

/** A row of `notification_providers` with its sealed secrets by name. */
export interface ProviderRow extends Record<string, unknown> {
  id: string;
  kind: ProviderKind;
  description: string;
  state: number;
  config: ProviderConfig;
  created_at: Date;
  changed_at: Date;
  sequence: number;
  /** Secret name → sealed value (src/crypto/masterkey.ts, context: providerSecretContext). */
  secrets: Record<string, string> | null;
}

/** What a provider's sealed secret is bound to: a sealed value copied to another row does not open. */
export function providerSecretContext(instanceId: string, id: string, name: string): string {
  return `notification_provider:${instanceId}:${id}:${name}`;
}

const COLUMNS = `p.id, p.kind, p.description, p.state, p.config, p.created_at, p.changed_at, p.sequence,
  (SELECT jsonb_object_agg(s.name, s.secret) FROM notification_provider_secrets s
   WHERE s.instance_id = p.instance_id AND s.provider_id = p.id) AS secrets`;

export async function getProvider(
  db: Queryable,
  instanceId: string,
  kind: ProviderKind,
  id: string,
): Promise<ProviderRow | undefined> {
  const rows = await db.query<ProviderRow>(
    `SELECT ${COLUMNS} FROM notification_providers p WHERE p.instance_id = $1 AND p.id = $2 AND p.kind = $3`,
    [instanceId, id, kind],
  );
  return rows[0];
}

/** The active provider of a kind (undefined: none is active). */
export async function activeProvider(
  db: Queryable,
  instanceId: string,
  kind: ProviderKind,
): Promise<ProviderRow | undefined> {
  const rows = await db.query<ProviderRow>(
    `SELECT ${COLUMNS} FROM notification_providers p WHERE p.instance_id = $1 AND p.kind = $2 AND p.state = 1`,
    [instanceId, kind],
  );
  return rows[0];
}

/** Sort columns of ProviderFieldName (0 / unspecified: creation date). */
const sortColumns: Record<number, string> = {
  0: "p.created_at",
  1: "p.id",
  2: "p.created_at",
  3: "p.changed_at",
  4: "p.description",
  5: "p.state",
};

export type ProviderFilter = { id: string } | { description: string; method: number } | { state: number };

export function searchProviders(
  db: Queryable,
  instanceId: string,
  kind: ProviderKind,
  filters: ProviderFilter[],
  sortColumn: number,
  page: Page,
): Promise<SearchResult<ProviderRow>> {
  const where = new Where().and((p) => `p.instance_id = ${p(instanceId)}`).and((p) => `p.kind = ${p(kind)}`);
  for (const f of filters) {
    if ("id" in f) where.and((p) => `p.id = ${p(f.id)}`);
    else if ("description" in f) where.text("p.description", f.method, f.description);
    else where.and((p) => `p.state = ${p(f.state)}`);
  }
  return search<ProviderRow>(db, {
    select: COLUMNS,
    from: "notification_providers p",
    where,
    orderBy: sortColumns[sortColumn] ?? "p.created_at",
    tiebreak: "p.id",
    page,
    instanceId,
    aggregateTypes: [aggregateOf[kind]],
    table: { from: "notification_providers p", alias: "p" },
  });
}
