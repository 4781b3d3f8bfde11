import { InvalidArgumentError } from "../errors.ts";
import type { Database, Queryable } from "../storage/database.ts";

/** One page of a search (ListQuery after defaults and limits). */
export interface Page {
  offset: number;
  limit: number;
  asc: boolean;
}

export const DEFAULT_SEARCH_LIMIT = 100;

/**
 * ListQuery → Page: limit 0 (unset) means the default of 100; above the operator's maximum
 * (PLATFORM_MAX_SEARCH_LIMIT, 1000 by default) is INVALID_ARGUMENT naming `query.limit`.
 */
export function toPage(
  query: { offset?: bigint | number; limit?: number; asc?: boolean } | undefined,
  maxLimit: number,
): Page {
  const limit = query?.limit || DEFAULT_SEARCH_LIMIT;
  if (limit > maxLimit) throw new InvalidArgumentError(`must be at most ${maxLimit}`, "query.limit");
  const offset = Number(query?.offset ?? 0);
  if (!Number.isSafeInteger(offset)) throw new InvalidArgumentError("is too large", "query.offset");
  return { offset, limit, asc: query?.asc === true };
}

/** TextFilterMethod numbers of the API. */
export const TextMethod = {
  equals: 0,
  equalsIgnoreCase: 1,
  startsWith: 2,
  startsWithIgnoreCase: 3,
  contains: 4,
  containsIgnoreCase: 5,
  endsWith: 6,
  endsWithIgnoreCase: 7,
} as const;

/** A WHERE clause built from parts, with its positional parameters. */
export class Where {
  readonly params: unknown[] = [];
  private readonly clauses: string[] = [];

  /** Adds a parameter and returns its placeholder (`$n`). */
  param(value: unknown): string {
    this.params.push(value);
    return `$${this.params.length}`;
  }

  /** Adds a condition; `build` gets a function turning values into placeholders. */
  and(build: (p: (value: unknown) => string) => string): this {
    this.clauses.push(build((value) => this.param(value)));
    return this;
  }

  /**
   * `column` compared with `value` by a TextFilterMethod; LIKE wildcards in the value match literally.
   * `lowerIndexed`: the column is indexed as `lower(column) text_pattern_ops` (and not by itself), so the
   * equality and prefix methods compare `lower(column)` with `lower(value)` (which that index serves,
   * whatever the collation), the case-sensitive ones also the column itself. Without it, a prefix needs an
   * index on the column in text_pattern_ops to be served by an index. CONTAINS and ENDS_WITH scan.
   */
  text(column: string, method: number, value: string, options: { lowerIndexed?: boolean } = {}): this {
    const like = value.replace(/[\\%_]/g, (c) => `\\${c}`);
    if (options.lowerIndexed) {
      const lowered = `lower(${column})`;
      switch (method) {
        case TextMethod.equals:
          return this.and((p) => {
            const v = p(value);
            return `${lowered} = lower(${v}) AND ${column} = ${v}`;
          });
        case TextMethod.equalsIgnoreCase:
          return this.and((p) => `${lowered} = lower(${p(value)})`);
        case TextMethod.startsWith:
          return this.and((p) => {
            const v = p(`${like}%`);
            return `${lowered} LIKE lower(${v}) AND ${column} LIKE ${v}`;
          });
        case TextMethod.startsWithIgnoreCase:
          return this.and((p) => `${lowered} LIKE lower(${p(`${like}%`)})`);
      }
    }
    switch (method) {
      case TextMethod.equals:
        return this.and((p) => `${column} = ${p(value)}`);
      case TextMethod.equalsIgnoreCase:
        return this.and((p) => `lower(${column}) = lower(${p(value)})`);
      case TextMethod.startsWith:
        return this.and((p) => `${column} LIKE ${p(`${like}%`)}`);
      case TextMethod.startsWithIgnoreCase:
        return this.and((p) => `${column} ILIKE ${p(`${like}%`)}`);
      case TextMethod.contains:
        return this.and((p) => `${column} LIKE ${p(`%${like}%`)}`);
      case TextMethod.containsIgnoreCase:
        return this.and((p) => `${column} ILIKE ${p(`%${like}%`)}`);
      case TextMethod.endsWith:
        return this.and((p) => `${column} LIKE ${p(`%${like}`)}`);
      case TextMethod.endsWithIgnoreCase:
        return this.and((p) => `${column} ILIKE ${p(`%${like}`)}`);
      default:
        throw new InvalidArgumentError(`unknown text filter method ${method}`);
    }
  }

  /** `column` is one of `values` (an empty list matches nothing). */
  in(column: string, values: readonly unknown[]): this {
    return this.and((p) => `${column} = ANY(${p(values)})`);
  }

  toString(): string {
    return this.clauses.length ? this.clauses.join(" AND ") : "TRUE";
  }
}

export interface SearchResult<T> {
  rows: T[];
  total: number;
  appliedLimit: number;
  endOfList: boolean;
  /** Global position of the newest event the read model has applied (in the instance). */
  processedSequence: number;
  timestamp?: Date;
}

export interface SearchSpec {
  /** Columns to select. */
  select: string;
  /** Table (with joins). */
  from: string;
  where: Where;
  /** ORDER BY expression without direction (a unique tiebreaker is appended: `tiebreak`). */
  orderBy: string;
  tiebreak: string;
  page: Page;
  /** For ListDetails.processed_sequence: the instance and the aggregate types the read model follows. */
  instanceId: string;
  aggregateTypes: string[];
  /**
   * The searched table alone with its alias (`users u`), when `where`, `orderBy` and `tiebreak` reference
   * only it and `tiebreak` is unique in the instance: the page's keys are then chosen on it alone (an
   * index-only scan where an index holds the filter and the order) and only the page's rows are read and
   * joined (late row lookup), and the total is counted on it alone.
   */
  table?: { from: string; alias: string };
  /**
   * Set when `where` restricts the search to the instance (scope '') or to one organization (scope = its
   * ID) and nothing else: total_result is then read from the `search_counts` rows of `resource` (kept by
   * triggers: migration 0100) instead of being counted.
   */
  counted?: { resource: string; scope: string };
}

/** Delta rows of a search_counts key above which a search folds them into one. */
const FOLD_ABOVE = 64;
/** Rows folded at once above which the table is vacuumed and its statistics refreshed. */
const VACUUM_AFTER = 10_000;

/**
 * Runs a paged search and fills the ListDetails numbers: the page, its total and the processed sequence,
 * in three queries whose cost follows the page and the filter's selectivity, not the table
 * (docs/architecture.md, "Searches"):
 * - the page: no window over all matching rows; read in index order and, with `table`, by late row lookup;
 * - the total: exact: `offset + rows` when the page is the last one (fewer rows than the limit), else the
 *   `search_counts` sum when `counted`, else a separate `count(*)` on the filter alone;
 * - the processed sequence: the newest event of each followed aggregate type, one LIMIT 1 index lookup per
 *   type, not a backwards walk over every newer event of the instance.
 */
export async function search<T extends Record<string, unknown>>(
  db: Queryable,
  spec: SearchSpec,
): Promise<SearchResult<T>> {
  const direction = spec.page.asc ? "ASC" : "DESC";
  const where = spec.where;
  const filterParams = [...where.params];
  const order = `${spec.orderBy} ${direction}, ${spec.tiebreak} ${direction}`;
  const limit = where.param(spec.page.limit);
  const offset = where.param(spec.page.offset);
  let pageSql: string;
  if (spec.table) {
    const instance = where.param(spec.instanceId);
    pageSql = `SELECT ${spec.select} FROM ${spec.from}
      WHERE ${spec.table.alias}.instance_id = ${instance} AND ${spec.tiebreak} IN (
        SELECT ${spec.tiebreak} FROM ${spec.table.from} WHERE ${where} ORDER BY ${order} LIMIT ${limit} OFFSET ${offset}
      ) ORDER BY ${order}`;
  } else {
    pageSql = `SELECT ${spec.select} FROM ${spec.from} WHERE ${where} ORDER BY ${order} LIMIT ${limit} OFFSET ${offset}`;
  }
  const [rows, processed] = await Promise.all([
    db.query<T>(pageSql, where.params),
    processedSequence(db, spec.instanceId, spec.aggregateTypes),
  ]);
  const total =
    rows.length > 0 && rows.length < spec.page.limit
      ? spec.page.offset + rows.length
      : await countTotal(db, spec, filterParams);
  return {
    rows,
    total,
    appliedLimit: spec.page.limit,
    endOfList: spec.page.offset + rows.length >= total,
    processedSequence: Number(processed?.position ?? 0),
    timestamp: processed?.created_at ?? undefined,
  };
}

async function countTotal(db: Queryable, spec: SearchSpec, params: unknown[]): Promise<number> {
  if (spec.counted) return countedTotal(db, spec.instanceId, spec.counted.resource, spec.counted.scope);
  const counted = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${spec.table?.from ?? spec.from} WHERE ${spec.where}`,
    params,
  );
  return Number(counted[0].n);
}

/** The sum of a `search_counts` key; folds its rows into one when there are many. */
async function countedTotal(
  db: Queryable,
  instanceId: string,
  resource: string,
  scope: string,
): Promise<number> {
  const key = [instanceId, resource, scope];
  const [sum] = await db.query<{ n: string | number; rows: number }>(
    `SELECT coalesce(sum(delta), 0)::bigint AS n, count(*)::int AS rows FROM search_counts
     WHERE instance_id = $1 AND resource = $2 AND scope = $3`,
    key,
  );
  if (sum.rows > FOLD_ABOVE) await foldCounts(db, key);
  return Number(sum.n);
}

/**
 * Replaces the delta rows of a key by their sum, in one statement: readers see the rows before or after
 * it, both summing the same; writers only insert and never wait. Of concurrent searches, the one that gets
 * the key's advisory lock folds; the others skip (a fold is housekeeping: a failure is ignored).
 */
async function foldCounts(db: Queryable, key: string[]): Promise<void> {
  const database = db as Partial<Database>;
  if (!database.transaction) return;
  try {
    const rows = await database.transaction(async (tx) => {
      const [lock] = await tx.query<{ locked: boolean }>(
        "SELECT pg_try_advisory_xact_lock(hashtextextended('search_counts:' || $1 || ':' || $2 || ':' || $3, 0)) AS locked",
        key,
      );
      if (!lock?.locked) return 0;
      const [folded] = await tx.query<{ n: number }>(
        `WITH folded AS (
           DELETE FROM search_counts WHERE instance_id = $1 AND resource = $2 AND scope = $3 RETURNING delta
         ), summed AS (
           INSERT INTO search_counts (instance_id, resource, scope, delta)
           SELECT $1, $2, $3, sum(delta) FROM folded HAVING count(*) > 0
         )
         SELECT count(*)::int AS n FROM folded`,
        key,
      );
      return folded?.n ?? 0;
    });
    // After folding a bulk load's rows, the statistics still describe the key as most of the table (the
    // planner would scan the table for the one row left) and the index holds their dead entries until
    // a vacuum: do both now rather than when autovacuum gets to it.
    if (rows > VACUUM_AFTER) await db.query("VACUUM (ANALYZE) search_counts");
  } catch {
    // the next search folds
  }
}

/**
 * The newest event of the instance among `aggregateTypes`: one backward step on
 * events (instance_id, aggregate_type, position) per type. The type is compared as a range and the order
 * names it, so that index is the only one that gives the order: with `aggregate_type = t` the planner may
 * instead walk events_position_idx backwards from the newest event, filtering out every newer event of
 * other types (its estimate for an unknown type assumes a match within a few rows).
 */
async function processedSequence(
  db: Queryable,
  instanceId: string,
  aggregateTypes: string[],
): Promise<{ position: number | null; created_at: Date | null } | undefined> {
  const rows = await db.query<{ position: number | null; created_at: Date | null }>(
    `SELECT e.position, e.created_at FROM unnest($2::text[]) AS t(aggregate_type)
     CROSS JOIN LATERAL (
       SELECT position, created_at FROM events
       WHERE instance_id = $1 AND aggregate_type >= t.aggregate_type AND aggregate_type <= t.aggregate_type
       ORDER BY aggregate_type DESC, position DESC LIMIT 1
     ) e ORDER BY e.position DESC LIMIT 1`,
    [instanceId, aggregateTypes],
  );
  return rows[0];
}
