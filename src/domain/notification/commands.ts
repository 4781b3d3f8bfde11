/**
 * Commands of notification providers. Secrets must be read back (an SMTP password is presented to the
 * server, an SMS signing key keys the HMAC of each call), so a hash is of no use: the caller seals them
 * with the master key and they are written here to `notification_provider_secrets` in the transaction of
 * the events; no event carries them.
 *
 * Activation keeps at most one active provider per kind and instance: activating takes a per-instance
 * transaction lock of the kind, reads the active provider from the read model and deactivates it in the
 * same push (the unique index `notification_providers_active_idx` refuses anything else).
 */
import { InvalidArgumentError, NotFoundError } from "../../errors.ts";
import type { EventStore } from "../../eventstore/eventstore.ts";
import type { CommandTx, NewEvent, PushContext, StoredEvent } from "../../eventstore/types.ts";
import {
  aggregateOf,
  foldProvider,
  mergeConfig,
  type ProviderAggregate,
  type ProviderConfig,
  ProviderEvents,
  type ProviderKind,
  ProviderState,
  SECRET,
  type SmtpConfig,
} from "./events.ts";

/** Result of a command: the version of the provider after it. */
export interface Version {
  id: string;
  sequence: number;
  changeDate: Date;
}

/** A secret to store: `sealed` is written unless `isCurrent(storedSealed)` says it is the same value. */
export interface SecretInput {
  name: string;
  sealed: string;
  isCurrent?(storedSealed: string): boolean;
}

const LABEL: Record<ProviderKind, string> = { smtp: "SMTP provider", sms: "SMS provider" };

function versionOf(event: StoredEvent): Version {
  return { id: event.aggregateId, sequence: event.sequence, changeDate: event.createdAt };
}

function event(ctx: PushContext, kind: ProviderKind, id: string, type: string, payload = {}): NewEvent {
  return { aggregateType: aggregateOf[kind], aggregateId: id, type, resourceOwner: ctx.instanceId, payload };
}

async function load(tx: CommandTx, kind: ProviderKind, id: string): Promise<ProviderAggregate> {
  const state = foldProvider(kind, await tx.load(aggregateOf[kind], id));
  if (!state) throw new NotFoundError(`${LABEL[kind]} ${id} not found`);
  return state;
}

async function storedSecret(tx: CommandTx, instanceId: string, id: string, name: string) {
  const rows = await tx.query<{ secret: string }>(
    "SELECT secret FROM notification_provider_secrets WHERE instance_id = $1 AND provider_id = $2 AND name = $3",
    [instanceId, id, name],
  );
  return rows[0]?.secret;
}

async function storeSecret(tx: CommandTx, instanceId: string, id: string, secret: SecretInput) {
  await tx.query(
    `INSERT INTO notification_provider_secrets (instance_id, provider_id, name, secret) VALUES ($1, $2, $3, $4)
     ON CONFLICT (instance_id, provider_id, name) DO UPDATE SET secret = EXCLUDED.secret`,
    [instanceId, id, secret.name, secret.sealed],
  );
}

async function eraseSecrets(tx: CommandTx, instanceId: string, id: string, name?: string) {
  await tx.query(
    `DELETE FROM notification_provider_secrets WHERE instance_id = $1 AND provider_id = $2
     AND ($3::text IS NULL OR name = $3)`,
    [instanceId, id, name ?? null],
  );
}

/** SMTP AUTH needs a user and a password together. */
function checkSmtpAuth(config: SmtpConfig, hasPassword: boolean): void {
  if (config.user && !hasPassword)
    throw new InvalidArgumentError("is required with provider.user", "provider.password");
  if (!config.user && hasPassword)
    throw new InvalidArgumentError("is required with provider.password", "provider.user");
}

/** Adds a provider, inactive, with its sealed secrets. */
export async function addProvider(
  store: EventStore,
  ctx: PushContext,
  kind: ProviderKind,
  id: string,
  config: ProviderConfig,
  secrets: SecretInput[],
): Promise<Version> {
  if (kind === "smtp")
    checkSmtpAuth(
      config as SmtpConfig,
      secrets.some((s) => s.name === SECRET.password),
    );
  const [added] = await store.push(ctx, async (tx) => {
    for (const secret of secrets) await storeSecret(tx, ctx.instanceId, id, secret);
    return [event(ctx, kind, id, ProviderEvents[kind].added, { ...config })];
  });
  return versionOf(added);
}

/** A change of a provider: the fields given (an empty optional field removes it) and a new secret. */
export interface ProviderChange {
  fields: Record<string, unknown>;
  secret?: SecretInput;
}

/**
 * Changes what differs (no event when nothing differs). An SMTP provider whose user is removed loses its
 * password; one that gets a user must have a password (stored or given). NOT_FOUND when the provider does
 * not exist.
 */
export async function changeProvider(
  store: EventStore,
  ctx: PushContext,
  kind: ProviderKind,
  id: string,
  change: ProviderChange,
): Promise<Version> {
  let current: Version | undefined;
  const events = await store.push(ctx, async (tx) => {
    const state = await load(tx, kind, id);
    current = { id, sequence: state.sequence, changeDate: state.changedAt };
    const before = state.config as unknown as Record<string, unknown>;
    const payload: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(change.fields)) {
      if (value === undefined) continue;
      if (value === "" && before[key] === undefined) continue; // removing what is absent
      if (before[key] !== value) payload[key] = value;
    }
    const merged = mergeConfig(state.config, payload);
    if (kind === "smtp") {
      const stored = await storedSecret(tx, ctx.instanceId, id, SECRET.password);
      const smtp = merged as SmtpConfig;
      if (!smtp.user && stored !== undefined && !change.secret) {
        await eraseSecrets(tx, ctx.instanceId, id, SECRET.password);
        payload.password_changed = true;
      }
      checkSmtpAuth(smtp, change.secret !== undefined || (stored !== undefined && !!smtp.user));
      if (change.secret && !(stored !== undefined && change.secret.isCurrent?.(stored))) {
        await storeSecret(tx, ctx.instanceId, id, change.secret);
        payload.password_changed = true;
      }
    }
    if (Object.keys(payload).length === 0) return [];
    return [event(ctx, kind, id, ProviderEvents[kind].changed, payload)];
  });
  return events.length ? versionOf(events[0]) : current!;
}

/** Serializes the activations of one kind in one instance (held until the transaction ends). */
async function lockActivation(tx: CommandTx, instanceId: string, kind: ProviderKind): Promise<void> {
  await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [
    `notification_providers:${kind}:${instanceId}`,
  ]);
}

/**
 * Makes `id` the active provider of its kind; the provider active until then is deactivated in the same
 * push. Nothing when it is active already. NOT_FOUND when it does not exist.
 */
export async function activateProvider(
  store: EventStore,
  ctx: PushContext,
  kind: ProviderKind,
  id: string,
): Promise<Version> {
  let current: Version | undefined;
  const events = await store.push(ctx, async (tx) => {
    await lockActivation(tx, ctx.instanceId, kind);
    const state = await load(tx, kind, id);
    current = { id, sequence: state.sequence, changeDate: state.changedAt };
    if (state.state === ProviderState.active) return [];
    const active = await tx.query<{ id: string }>(
      "SELECT id FROM notification_providers WHERE instance_id = $1 AND kind = $2 AND state = 1 AND id <> $3",
      [ctx.instanceId, kind, id],
    );
    const out: NewEvent[] = [];
    for (const row of active) {
      const other = foldProvider(kind, await tx.load(aggregateOf[kind], row.id));
      if (other?.state !== ProviderState.active) continue;
      out.push(event(ctx, kind, row.id, ProviderEvents[kind].deactivated, { superseded_by: id }));
    }
    out.push(event(ctx, kind, id, ProviderEvents[kind].activated));
    return out;
  });
  const own = events.find((e) => e.aggregateId === id);
  return own ? versionOf(own) : current!;
}

/** Deactivates a provider; nothing when it is inactive. NOT_FOUND when it does not exist. */
export async function deactivateProvider(
  store: EventStore,
  ctx: PushContext,
  kind: ProviderKind,
  id: string,
): Promise<Version> {
  let current: Version | undefined;
  const events = await store.push(ctx, async (tx) => {
    const state = await load(tx, kind, id);
    current = { id, sequence: state.sequence, changeDate: state.changedAt };
    if (state.state !== ProviderState.active) return [];
    return [event(ctx, kind, id, ProviderEvents[kind].deactivated)];
  });
  return events.length ? versionOf(events[0]) : current!;
}

/** Removes a provider with its secrets. NOT_FOUND when it does not exist. */
export async function removeProvider(
  store: EventStore,
  ctx: PushContext,
  kind: ProviderKind,
  id: string,
): Promise<Version> {
  const [removed] = await store.push(ctx, async (tx) => {
    const state = await load(tx, kind, id);
    await eraseSecrets(tx, ctx.instanceId, id);
    return [event(ctx, kind, id, ProviderEvents[kind].removed, { description: state.config.description })];
  });
  return versionOf(removed);
}
