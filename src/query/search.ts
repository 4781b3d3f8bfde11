import { InvalidArgumentError } from "../errors.ts";
import type { Queryable } from "../storage/database.ts";

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

  /** `column` compared with `value` by a TextFilterMethod; LIKE wildcards in the value match literally. */
  text(column: string, method: number, value: string): this {
    const like = value.replace(/[\\%_]/g, (c) => `\\${c}`);
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
}

/** Runs a paged search and fills the ListDetails numbers. */
export async function search<T extends Record<string, unknown>>(
  db: Queryable,
  spec: SearchSpec,
): Promise<SearchResult<T>> {
  const direction = spec.page.asc ? "ASC" : "DESC";
  const where = spec.where;
  const limit = where.param(spec.page.limit);
  const offset = where.param(spec.page.offset);
  const rows = await db.query<T & { total_count: number }>(
    `SELECT ${spec.select}, count(*) OVER () AS total_count FROM ${spec.from} WHERE ${where}
     ORDER BY ${spec.orderBy} ${direction}, ${spec.tiebreak} ${direction} LIMIT ${limit} OFFSET ${offset}`,
    where.params,
  );
  let total = rows.length ? Number(rows[0].total_count) : 0;
  if (rows.length === 0 && spec.page.offset > 0) {
    const params = where.params.slice(0, -2);
    const counted = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${spec.from} WHERE ${where}`,
      params,
    );
    total = Number(counted[0].n);
  }
  const processed = await db.query<{ position: number | null; created_at: Date | null }>(
    `SELECT position, created_at FROM events WHERE instance_id = $1 AND aggregate_type = ANY($2) ORDER BY position DESC LIMIT 1`,
    [spec.instanceId, spec.aggregateTypes],
  );
  for (const row of rows) delete (row as Record<string, unknown>).total_count;
  return {
    rows,
    total,
    appliedLimit: spec.page.limit,
    endOfList: spec.page.offset + rows.length >= total,
    processedSequence: Number(processed[0]?.position ?? 0),
    timestamp: processed[0]?.created_at ?? undefined,
  };
}
