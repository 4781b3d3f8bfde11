/**
 * Notification delivery assembled for one process (src/platform.ts): `queue` writes a message to the
 * outbox in the transaction of its event (./outbox.ts), the append hooks queue PASSWORD_CHANGED with every
 * password change and EMAIL_CHANGED (to the previous address) with every change of an e-mail address, and
 * the worker (./worker.ts) sends. On PostgreSQL a `pg_notify` in the queuing transaction wakes every
 * process's worker through its LISTEN connection; this process's commits wake its own worker at once.
 */
import { type Config, externalOrigin } from "../config.ts";
import { randomToken } from "../crypto/tokens.ts";
import { SETTINGS } from "../domain/settings/events.ts";
import { UserEvent } from "../domain/user/events.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { StopCounts } from "../outbox/worker.ts";
import type { Database, Queryable } from "../storage/database.ts";
import type { NotificationListener } from "../storage/notifications.ts";
import { MESSAGE_CHANNEL, type NewMessage, queueMessage } from "./outbox.ts";
import type { NotificationSender } from "./sender.ts";
import { MessageWorker, type MessageWorkerLog } from "./worker.ts";

export interface NotificationDelivery {
  worker: MessageWorker;
  /** Writes a message to the outbox in `tx`, the transaction of the event that causes it; its ID. */
  queue(tx: Queryable, message: NewMessage): Promise<string>;
  /** The origin links lead to when no request gives one: the instance's primary domain. */
  originOf(tx: Queryable, instanceId: string): Promise<string>;
  /** PostgreSQL: wakes the worker when any process committed messages. Before the listener starts. */
  listen(listener: NotificationListener): void;
  start(): void;
  /**
   * Stops the worker and waits for the sends in flight until `deadline` (ms since the epoch; default:
   * PLATFORM_SHUTDOWN_GRACE_SECONDS from now); before the database closes.
   */
  close(deadline?: number): Promise<StopCounts>;
}

/**
 * `delivery` queueing every message with the branding, texts and language settings of `orgId` instead of
 * its recipient's organization's (`NewMessage.brandingOrgId`): the messages of a sign-in whose project
 * enforces its organization's (src/login/labeling.ts). Without `orgId`, `delivery` itself.
 */
export function labeledDelivery(
  delivery: NotificationDelivery | undefined,
  orgId: string | undefined,
): NotificationDelivery | undefined {
  if (!delivery || !orgId) return delivery;
  return {
    worker: delivery.worker,
    queue: (tx, message) => delivery.queue(tx, { ...message, brandingOrgId: message.brandingOrgId ?? orgId }),
    originOf: (tx, instanceId) => delivery.originOf(tx, instanceId),
    listen: (listener) => delivery.listen(listener),
    start: () => delivery.start(),
    close: () => delivery.close(),
  };
}

export function createNotificationDelivery(options: {
  config: Config;
  db: Database;
  eventStore: EventStore;
  sender: NotificationSender;
  masterKey: Buffer;
  log: MessageWorkerLog;
  metrics?: Metrics;
}): NotificationDelivery {
  const { config, db, eventStore, masterKey } = options;
  const worker = new MessageWorker(
    db,
    options.sender,
    masterKey,
    config.notification,
    options.log,
    randomToken(12),
    options.metrics,
  );
  const notify = db.kind === "postgres";
  // Set when a transaction queued a message; the next commit wakes the worker. On the embedded database
  // transactions run one at a time, so that commit is the queuing one; on PostgreSQL the pg_notify of
  // the queuing transaction wakes the worker whatever commit came first.
  let queued = false;
  const queue = async (tx: Queryable, message: NewMessage) => {
    const id = await queueMessage(tx, masterKey, message, notify);
    queued = true;
    return id;
  };
  const originOf = async (tx: Queryable, instanceId: string) => {
    const rows = await tx.query<{ domain: string }>(
      "SELECT domain FROM instance_domains WHERE instance_id = $1 ORDER BY is_primary DESC, created_at LIMIT 1",
      [instanceId],
    );
    return externalOrigin(config, rows[0]?.domain ?? config.externalDomain);
  };

  // PASSWORD_CHANGED tells the user of every password change, by e-mail, when it has an address (as
  // ZITADEL's default notification policy does).
  eventStore.onAppended(async (tx, events) => {
    for (const event of events) {
      if (event.type !== UserEvent.passwordChanged || event.instanceId === "") continue;
      const rows = await tx.query<{ email: string | null; preferred_language: string | null }>(
        "SELECT email, preferred_language FROM users WHERE instance_id = $1 AND id = $2",
        [event.instanceId, event.aggregateId],
      );
      const user = rows[0];
      if (!user?.email) continue;
      await queue(tx, {
        instanceId: event.instanceId,
        userId: event.aggregateId,
        type: "PASSWORD_CHANGED",
        recipient: user.email,
        language: user.preferred_language ?? undefined,
        origin: await originOf(tx, event.instanceId),
      });
    }
  });
  // EMAIL_CHANGED tells the previous address of every change of a user's e-mail address (whoever made
  // it): the owner's only notice when someone else moved the account to an address of theirs. Queued
  // before the projections apply the change, while the users read model still has the previous address.
  eventStore.onAppending(async (tx, events) => {
    for (const event of events) {
      if (event.type !== UserEvent.changed || event.instanceId === "") continue;
      const next = event.payload?.email;
      if (typeof next !== "string") continue;
      const rows = await tx.query<{ email: string | null; preferred_language: string | null }>(
        "SELECT email, preferred_language FROM users WHERE instance_id = $1 AND id = $2",
        [event.instanceId, event.aggregateId],
      );
      const previous = rows[0]?.email;
      if (!previous || previous === next) continue;
      await queue(tx, {
        instanceId: event.instanceId,
        userId: event.aggregateId,
        type: "EMAIL_CHANGED",
        recipient: previous,
        language: rows[0].preferred_language ?? undefined,
        origin: await originOf(tx, event.instanceId),
      });
    }
  });
  eventStore.onStale(() => worker.forgetLanguages());
  eventStore.onCommitted((events) => {
    if (events.some((e) => e.aggregateType === SETTINGS)) worker.forgetLanguages();
    if (!queued) return;
    queued = false;
    worker.wake();
  });

  let closing: Promise<StopCounts> | undefined;
  return {
    worker,
    queue,
    originOf,
    listen(listener) {
      worker.listen(listener, MESSAGE_CHANNEL);
    },
    start() {
      worker.start();
    },
    close(deadline = Date.now() + config.shutdownGraceSeconds * 1000) {
      closing ??= worker.stop(deadline);
      return closing;
    },
  };
}
