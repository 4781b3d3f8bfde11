/**
 * CLIENT spans for the database, for both backends (embedded PGlite and PostgreSQL speak the same SQL): a
 * span per statement, named by its operation and first table (`SELECT users`, `INSERT events`), and a span
 * per transaction holding its statements. Never the parameters, nor the statement's text: only the words
 * that name what it does.
 *
 * Statements run outside any traced work (the delivery worker's polling, the token sweeper) make no
 * spans: each would be a trace of its own every few seconds, telling nothing. Neither do those of a request
 * whose trace is not sampled: they would not be recorded anyway (and cost nothing this way).
 */
import {
  type Context,
  context,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import type { Database, Queryable, Row, TransactionOptions } from "../storage/database.ts";

const SYSTEM = {
  "db.system.name": "postgresql",
  // the name before semantic conventions 1.26, which many backends still show
  "db.system": "postgresql",
} as const;

/** `db` with a span around each statement and transaction made while a span is current. */
export function tracedDatabase<D extends Database>(db: D, tracer: Tracer): D {
  const traced = (parent: Context, sql: string, run: () => Promise<unknown>) => {
    const { name, operation, table } = summarize(sql);
    const span = tracer.startSpan(
      name,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          ...SYSTEM,
          "db.operation.name": operation,
          ...(table ? { "db.collection.name": table } : {}),
        },
      },
      parent,
    );
    return ended(span, run());
  };
  const queryable = (q: Queryable, parentOf: () => Context | undefined): Queryable => ({
    query: <T extends Row = Row>(sql: string, params?: readonly unknown[]) => {
      const parent = parentOf();
      return parent
        ? (traced(parent, sql, () => q.query<T>(sql, params)) as Promise<T[]>)
        : q.query<T>(sql, params);
    },
    exec: (sql: string) => {
      const parent = parentOf();
      return parent ? (traced(parent, sql, () => q.exec(sql)) as Promise<void>) : q.exec(sql);
    },
  });
  const wrapped: Database = {
    get kind() {
      return db.kind;
    },
    ...queryable(db, currentParent),
    transaction: <T>(fn: (tx: Queryable) => Promise<T>, options?: TransactionOptions): Promise<T> => {
      const parent = currentParent();
      if (!parent) return db.transaction(fn, options);
      const span = tracer.startSpan("transaction", { kind: SpanKind.CLIENT, attributes: SYSTEM }, parent);
      const inside = trace.setSpan(parent, span);
      // The statements of the transaction are its children, whatever context the driver runs `fn` in.
      return ended(
        span,
        context.with(inside, () => db.transaction((tx) => fn(queryable(tx, () => inside)), options)),
      );
    },
    holdProcessLease: (processId) => db.holdProcessLease(processId),
    isProcessAlive: (processId) => db.isProcessAlive(processId),
    storageProblem: db.storageProblem && (() => db.storageProblem?.()),
    poolStats: db.poolStats && (() => db.poolStats!()),
    close: () => db.close(),
  };
  // Anything else the implementation offers (the pool of PostgreSQL, notices) stays reachable.
  return Object.setPrototypeOf(wrapped, db) as D;
}

/**
 * The current context when a recorded span is current in it, else undefined: the work is not traced (no
 * request), or its trace is not sampled, so that its statements would not be recorded either.
 */
function currentParent(): Context | undefined {
  const active = context.active();
  return trace.getSpan(active)?.isRecording() ? active : undefined;
}

function ended<T>(span: Span, running: Promise<T>): Promise<T> {
  return running.then(
    (value) => {
      span.end();
      return value;
    },
    (error: unknown) => {
      // The SQLSTATE (23505 unique_violation ...), not the message: it may quote values.
      const code = (error as { code?: unknown } | null)?.code;
      span.setAttribute("error.type", typeof code === "string" ? code : ((error as Error)?.name ?? "Error"));
      if (typeof code === "string") span.setAttribute("db.response.status_code", code);
      span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
      throw error;
    },
  );
}

interface Summary {
  name: string;
  operation: string;
  table?: string;
}

/** Statements are constants of the code, so their summaries are kept (bounded, in case one is not). */
const summaries = new Map<string, Summary>();
const MAX_SUMMARIES = 2000;
/** 'strings' (with '' inside), E'strings', $tag$dollar-quoted$tag$, line and block comments. */
const LITERALS_AND_COMMENTS = /'(?:[^']|'')*'|\$([A-Za-z_]\w*)?\$[\s\S]*?\$\1\$|--[^\n]*|\/\*[\s\S]*?\*\//g;
const TARGET = /\b(?:FROM|INTO|UPDATE|JOIN)\s+(?:ONLY\s+)?("?[A-Za-z_]\w*"?(?:\."?[A-Za-z_]\w*"?)?)/i;

/**
 * `SELECT users` for `SELECT ... FROM users ...`: the first keyword and the first table after FROM,
 * INTO, UPDATE or JOIN (a `WITH` statement: its main statement's). Only SQL keywords and
 * identifiers outside literals and comments, so a value written into a statement can never show.
 */
export function summarize(sql: string): Summary {
  const known = summaries.get(sql);
  if (known) return known;
  // Literals and comments out first: a word of a value must never look like a table.
  let code = sql.replace(LITERALS_AND_COMMENTS, " ");
  let words = /^\s*([A-Za-z]+)/.exec(code);
  if (words?.[1].toUpperCase() === "WITH") {
    // A statement with common table expressions is named by its main statement (`INSERT events` for
    // `WITH claimed AS (INSERT INTO unique_constraints …) INSERT INTO events …`): the expressions'
    // parenthesized bodies out, the first data keyword after them.
    let previous: string;
    do {
      previous = code;
      code = code.replace(/\([^()]*\)/g, " ");
    } while (code !== previous);
    const main = /\b(SELECT|INSERT|UPDATE|DELETE|MERGE)\b[\s\S]*$/i.exec(code);
    if (main) {
      code = main[0];
      words = /^([A-Za-z]+)/.exec(code);
    }
  }
  const operation = words ? words[1].toUpperCase() : "SQL";
  const target = TARGET.exec(code);
  const table = target ? target[1].replaceAll('"', "") : undefined;
  const summary = { name: table ? `${operation} ${table}` : operation, operation, table };
  if (summaries.size >= MAX_SUMMARIES) summaries.clear();
  summaries.set(sql, summary);
  return summary;
}
