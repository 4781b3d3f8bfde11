import type { Queryable } from "../storage/database.ts";

/** Claims or releases a value that must be unique, in the same transaction as the event. */
export type UniqueConstraintAction =
  | {
      action: "add";
      /** e.g. "username"; together with the instance it forms the key. */
      type: string;
      field: string;
      /** Compare case-insensitively (the field is stored lower-cased). */
      ignoreCase?: boolean;
      /** Message of the ALREADY_EXISTS error when the value is taken. */
      message: string;
      /** Scope of the uniqueness: the event's instance (default) or the whole system. */
      scope?: "instance" | "system";
    }
  | { action: "remove"; type: string; field: string; ignoreCase?: boolean; scope?: "instance" | "system" }
  /** Releases every constraint of the event's instance (instance removal). */
  | { action: "remove_instance" };

/** An event a command wants to append. */
export interface NewEvent {
  aggregateType: string;
  aggregateId: string;
  type: string;
  payload?: Record<string, unknown> | null;
  /** Org or instance the aggregate belongs to. */
  resourceOwner: string;
  /** Defaults to the instance of the push context. */
  instanceId?: string;
  uniqueConstraints?: UniqueConstraintAction[];
}

export interface StoredEvent {
  instanceId: string;
  aggregateType: string;
  aggregateId: string;
  sequence: number;
  type: string;
  payload: Record<string, unknown> | null;
  creator: string;
  resourceOwner: string;
  createdAt: Date;
  position: number;
}

/** Who writes, and in which instance ('' for system-level aggregates). */
export interface PushContext {
  instanceId: string;
  /** User ID (or "system") recorded as the events' creator. */
  creator: string;
}

/** What a command sees inside its transaction. */
export interface CommandTx extends Queryable {
  /**
   * The events of one aggregate, oldest first. Loading an aggregate makes its current sequence the
   * expected one: if another writer appends to it before this transaction commits, the command
   * runs again from the start.
   */
  load(aggregateType: string, aggregateId: string, instanceId?: string): Promise<StoredEvent[]>;
  /**
   * The aggregate's current sequence, made the expected one as `load` does, without reading its events:
   * for commands that decide from a read model instead of folding a long history. Call it BEFORE reading
   * the read model, so that a write committed in between makes the append conflict (and the command re-run)
   * rather than go unnoticed.
   */
  expect(aggregateType: string, aggregateId: string, instanceId?: string): Promise<number>;
  /**
   * `expect` without a round trip of its own: makes `sequence` the expected one, read by the command in
   * the same statement as the read model it decides from (`lastSequenceSql` as a column, 0 when none), so
   * both come from one snapshot.
   */
  expectAt(aggregateType: string, aggregateId: string, sequence: number, instanceId?: string): void;
}

export type EventHandler = (tx: Queryable, event: StoredEvent) => Promise<void>;

/**
 * A handler that applies, with its own event, some of the events that follow it in the same append: fewer
 * statements (a row inserted with the columns the next events would set). Answers how many of `following`
 * it applied, the first that many, which the projection's handlers then skip. It must leave the read model
 * as the projection's handlers would, one event after the other: a rebuild replays with those.
 */
export type AbsorbingHandler = (
  tx: Queryable,
  event: StoredEvent,
  following: readonly StoredEvent[],
) => Promise<number>;

/**
 * A read model maintained inline: its handlers run in the transaction that appends the event, so a
 * read right after a write sees it. It can be rebuilt from the events.
 */
export interface Projection {
  name: string;
  /** Read-model tables this projection alone writes: emptied before a rebuild. */
  tables: string[];
  /** Aggregate types whose events feed it (a rebuild replays these). */
  aggregateTypes: string[];
  handlers: Record<string, EventHandler>;
  /**
   * Used instead of `handlers` of the same event type when events are appended (not by rebuilds): each
   * may apply some of the events after its own at once (AbsorbingHandler).
   */
  absorbing?: Record<string, AbsorbingHandler>;
}
