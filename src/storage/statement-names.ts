import { createHash } from "node:crypto";

/**
 * Names for statements with parameters, so that each connection parses and plans a statement once and then
 * only binds and executes it (an unnamed statement is parsed, analysed and planned on every call: a large
 * part of PostgreSQL's CPU for the short statements of a sign-in or a token). The name is derived from the
 * text, so every connection and process agrees on it. Bounded: statements built from filters (searches)
 * could vary without end, and a prepared statement lives as long as its connection, so past
 * MAX_NAMED_STATEMENTS distinct texts the rest run unnamed, as before.
 */
export class StatementNames {
  private readonly names = new Map<string, string | undefined>();
  constructor(private readonly max = MAX_NAMED_STATEMENTS) {}

  nameFor(sql: string): string | undefined {
    if (this.names.has(sql) || this.names.size >= this.max) return this.names.get(sql);
    const name = `p_${createHash("sha256").update(sql).digest("base64url").slice(0, 22)}`;
    this.names.set(sql, name);
    return name;
  }

  /** This statement runs unnamed from now on (its prepared form broke: see PostgresDatabase.run). */
  forget(sql: string): void {
    this.names.set(sql, undefined);
  }
}

/**
 * PostgreSQL refuses to run a prepared statement whose result columns changed under it ("cached plan must
 * not change result type", SQLSTATE 0A000): a `SELECT t.*` prepared before another process's migration
 * added a column to t, during a rolling upgrade.
 */
export const PLAN_CHANGED = "0A000";

export const MAX_NAMED_STATEMENTS = 500;
