import { type messages, type PGlite, protocol, types } from "@electric-sql/pglite";
import type { Row } from "./database.ts";
import { PLAN_CHANGED, StatementNames } from "./statement-names.ts";

type BackendMessage = Awaited<ReturnType<PGlite["execProtocolStream"]>>[number];

/** What Describe said of a prepared statement: its parameters' types and its result columns. */
interface Described {
  parameterTypes: number[];
  columns: { name: string; dataTypeID: number }[];
}

/**
 * Statements on the embedded database, prepared once and then only bound and executed.
 *
 * PGlite's own `query` sends every statement unnamed, so PostgreSQL parses, analyses and plans it on every
 * call, on the server's one main thread: for the browser's sessions query 0.7 ms a call, against 0.06 ms
 * bound to a prepared statement (bench/results.md). Planning is the larger part, because it asks the file
 * system for the size of every table and index it touches. So this speaks the extended protocol itself:
 * Parse with a name and Describe once per statement text, then Bind + Execute + Sync in one round trip.
 * Names and their bound come from StatementNames, as on PostgreSQL; past the bound a statement is parsed
 * unnamed on each call, as PGlite does.
 *
 * Every call must hold PGlite's query lock (`runExclusive`) and, outside a transaction, its transaction
 * lock too: PgliteDatabase does both.
 */
export class PgliteStatements {
  private readonly names = new StatementNames();
  private readonly described = new Map<string, Described>();

  constructor(private readonly pg: PGlite) {}

  async run<T extends Row>(sql: string, params: readonly unknown[], inTransaction: boolean): Promise<T[]> {
    const name = this.names.nameFor(sql);
    try {
      return await this.runAs<T>(name ?? "", sql, params);
    } catch (error) {
      if (name === undefined || (error as { code?: unknown }).code !== PLAN_CHANGED) throw error;
      // A migration changed the columns under a prepared `t.*`: run it unnamed from now on. Inside a
      // transaction the failure has aborted it, so only outside one is the statement tried again.
      this.names.forget(sql);
      this.described.delete(name);
      await this.protocol(protocol.serialize.close({ type: "S", name }), protocol.serialize.sync());
      if (inTransaction) throw error;
      return this.runAs<T>("", sql, params);
    }
  }

  private async runAs<T extends Row>(name: string, sql: string, params: readonly unknown[]): Promise<T[]> {
    let statement = name === "" ? undefined : this.described.get(name);
    if (!statement) {
      statement = await this.prepare(name, sql);
      if (name !== "") this.described.set(name, statement);
    }
    const messages = await this.protocol(
      protocol.serialize.bind({ statement: name, values: this.serialize(statement, params) }),
      protocol.serialize.execute({}),
      protocol.serialize.sync(),
    );
    return this.rows<T>(statement, messages);
  }

  private async prepare(name: string, sql: string): Promise<Described> {
    const messages = await this.protocol(
      protocol.serialize.parse({ name, text: sql }),
      protocol.serialize.describe({ type: "S", name }),
      protocol.serialize.sync(),
    );
    const described: Described = { parameterTypes: [], columns: [] };
    for (const message of messages) {
      if (message.name === "parameterDescription")
        described.parameterTypes = (message as messages.ParameterDescriptionMessage).dataTypeIDs;
      else if (message.name === "rowDescription")
        described.columns = (message as messages.RowDescriptionMessage).fields.map((field) => ({
          name: field.name,
          dataTypeID: field.dataTypeID,
        }));
    }
    return described;
  }

  /** Parameters as PGlite's `query` sends them: text, through its serializer for the parameter's type. */
  private serialize(statement: Described, params: readonly unknown[]): (string | null)[] {
    return params.map((value, index) => {
      if (value === null || value === undefined) return null;
      const serializer = this.pg.serializers[statement.parameterTypes[index] as number];
      return serializer ? serializer(value) : String(value);
    });
  }

  /** Result rows as PGlite's `query` makes them: an object per row, each column through its parser. */
  private rows<T extends Row>(statement: Described, messages: BackendMessage[]): T[] {
    const rows: T[] = [];
    const { columns } = statement;
    for (const message of messages) {
      if (message.name !== "dataRow") continue;
      const fields = (message as messages.DataRowMessage).fields;
      const row: Row = {};
      for (let index = 0; index < columns.length; index++) {
        const column = columns[index] as Described["columns"][number];
        row[column.name] = types.parseType(fields[index] ?? null, column.dataTypeID, this.pg.parsers);
      }
      rows.push(row as T);
    }
    return rows;
  }

  /** One round trip with the database: the messages, in one buffer; PostgreSQL's errors are thrown. */
  private protocol(...parts: Uint8Array[]): Promise<BackendMessage[]> {
    const buffer = new Uint8Array(parts.reduce((length, part) => length + part.length, 0));
    let offset = 0;
    for (const part of parts) {
      buffer.set(part, offset);
      offset += part.length;
    }
    return this.pg.execProtocolStream(buffer, { syncToFs: false });
  }
}
