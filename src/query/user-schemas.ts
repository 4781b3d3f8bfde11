import { USER_SCHEMA } from "../domain/user-schema/events.ts";
import type { Queryable } from "../storage/database.ts";
import { type Page, type SearchResult, search, Where } from "./search.ts";

/** A row of `user_schemas`. */
export interface UserSchemaRow extends Record<string, unknown> {
  id: string;
  type: string;
  state: number;
  schema: Record<string, unknown>;
  possible_authenticators: number[];
  revision: number;
  created_at: Date;
  changed_at: Date;
  sequence: number;
}

const COLUMNS =
  "s.id, s.type, s.state, s.schema, s.possible_authenticators, s.revision, s.created_at, s.changed_at, s.sequence";

export async function getUserSchema(
  db: Queryable,
  instanceId: string,
  id: string,
): Promise<UserSchemaRow | undefined> {
  const rows = await db.query<UserSchemaRow>(
    `SELECT ${COLUMNS} FROM user_schemas s WHERE s.instance_id = $1 AND s.id = $2`,
    [instanceId, id],
  );
  return rows[0];
}

/** Several schemas of an instance by ID (the users' reads). */
export async function getUserSchemas(
  db: Queryable,
  instanceId: string,
  ids: string[],
): Promise<Map<string, UserSchemaRow>> {
  if (ids.length === 0) return new Map();
  const rows = await db.query<UserSchemaRow>(
    `SELECT ${COLUMNS} FROM user_schemas s WHERE s.instance_id = $1 AND s.id = ANY($2)`,
    [instanceId, [...new Set(ids)]],
  );
  return new Map(rows.map((row) => [row.id, row]));
}

/** Sort columns of UserSchemaFieldName (0 / unspecified: creation date). */
const sortColumns: Record<number, string> = {
  0: "s.created_at",
  1: "s.id",
  2: "s.created_at",
  3: "s.changed_at",
  4: "s.type",
  5: "s.state",
};

export type UserSchemaFilter = { id: string } | { type: string; method: number } | { state: number };

export function searchUserSchemas(
  db: Queryable,
  instanceId: string,
  filters: UserSchemaFilter[],
  sortColumn: number,
  page: Page,
): Promise<SearchResult<UserSchemaRow>> {
  const where = new Where().and((p) => `s.instance_id = ${p(instanceId)}`);
  for (const f of filters) {
    if ("id" in f) where.and((p) => `s.id = ${p(f.id)}`);
    else if ("type" in f) where.text("s.type", f.method, f.type);
    else where.and((p) => `s.state = ${p(f.state)}`);
  }
  return search<UserSchemaRow>(db, {
    select: COLUMNS,
    from: "user_schemas s",
    where,
    orderBy: sortColumns[sortColumn] ?? "s.created_at",
    tiebreak: "s.id",
    page,
    instanceId,
    aggregateTypes: [USER_SCHEMA],
    table: { from: "user_schemas s", alias: "s" },
  });
}
