import { FailedPreconditionError, NotFoundError } from "../../errors.ts";
import type { NewEvent } from "../../eventstore/types.ts";
import type { Queryable } from "../../storage/database.ts";
import {
  WEB_KEY,
  type WebKeyActivatedPayload,
  type WebKeyAddedPayload,
  type WebKeyConfig,
  type WebKeyDeactivatedPayload,
  WebKeyEvent,
  type WebKeyRemovedPayload,
  WebKeyState,
} from "./events.ts";

/**
 * Commands of web keys. They decide from the read model (`oidc_signing_keys`) read under the instance's
 * key lock (every writer of an instance's keys holds it), so the rows are current. Private keys are
 * sealed by the caller and written here to `oidc_signing_key_secrets` in the transaction of the events.
 */

/** A key as the commands see it (a row of the read model). */
export interface WebKeyRow {
  id: string;
  alg: string;
  config: WebKeyConfig;
  activeFrom?: Date;
  activeUntil?: Date;
  /** Undefined: published until deleted. */
  publishUntil?: Date;
  createdAt: Date;
  changedAt: Date;
  sequence: number;
}

/** Lifetimes a key gets when it is activated. */
export interface SigningWindow {
  /** How long a key signs. */
  signForMs: number;
  /** How long after it stops signing a key stays published (longer than any token it signed lives). */
  publishAfterMs: number;
}

/** Serializes the changes of an instance's keys across processes (held until the transaction ends). */
export async function lockInstanceKeys(tx: Queryable, instanceId: string): Promise<void> {
  await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`oidc_signing_keys:${instanceId}`]);
}

export function isPublished(row: WebKeyRow, now: number): boolean {
  return row.publishUntil === undefined || row.publishUntil.getTime() > now;
}

/** The key that signs at `now`: the newest whose window holds it (undefined: none). */
export function signingRow<T extends WebKeyRow>(rows: T[], now: number): T | undefined {
  let best: T | undefined;
  for (const r of rows) {
    if (!r.activeFrom || !r.activeUntil) continue;
    if (r.activeFrom.getTime() <= now && now < r.activeUntil.getTime()) {
      if (!best || r.activeFrom > best.activeFrom!) best = r;
    }
  }
  return best;
}

/** The state of a key at `now`, given the key that signs then. */
export function webKeyState(row: WebKeyRow, active: WebKeyRow | undefined, now: number): WebKeyState {
  if (!isPublished(row, now)) return WebKeyState.removed;
  if (row.id === active?.id) return WebKeyState.active;
  if (!row.activeFrom || row.activeFrom.getTime() > now) return WebKeyState.initial;
  return WebKeyState.inactive;
}

function event(instanceId: string, kid: string, type: string, payload: Record<string, unknown>): NewEvent {
  return { aggregateType: WEB_KEY, aggregateId: kid, resourceOwner: instanceId, instanceId, type, payload };
}

/** Adds a key: its sealed private key goes to the secrets table, its public key into the event. */
export async function addWebKey(
  tx: Queryable,
  instanceId: string,
  kid: string,
  sealedPrivateKey: string,
  payload: WebKeyAddedPayload,
): Promise<NewEvent> {
  await tx.query("INSERT INTO oidc_signing_key_secrets (instance_id, id, private_key) VALUES ($1, $2, $3)", [
    instanceId,
    kid,
    sealedPrivateKey,
  ]);
  return event(instanceId, kid, WebKeyEvent.added, { ...payload });
}

/**
 * Makes `kid` the key that signs from `now` for `window.signForMs`: the key signing until now stops
 * (deactivated, still published), keys prepared to follow it are dropped with their private keys (they
 * never signed). Nothing when `kid` signs already. NOT_FOUND when it is not a published key of the
 * instance.
 */
export async function activateWebKey(
  tx: Queryable,
  instanceId: string,
  rows: WebKeyRow[],
  kid: string,
  now: Date,
  window: SigningWindow,
): Promise<NewEvent[]> {
  const t = now.getTime();
  const target = rows.find((r) => r.id === kid && isPublished(r, t));
  if (!target) throw new NotFoundError("web key not found");
  const current = signingRow(rows, t);
  if (current?.id === kid) return [];
  const events: NewEvent[] = [];
  if (current) {
    const payload: WebKeyDeactivatedPayload = { active_until: now.toISOString() };
    events.push(event(instanceId, current.id, WebKeyEvent.deactivated, { ...payload }));
  }
  for (const r of rows) {
    if (r.id === kid || !r.activeFrom || r.activeFrom.getTime() <= t || !isPublished(r, t)) continue;
    await eraseSecret(tx, instanceId, r.id);
    const payload: WebKeyRemovedPayload = { reason: "superseded" };
    events.push(event(instanceId, r.id, WebKeyEvent.removed, { ...payload }));
  }
  const until = new Date(t + window.signForMs);
  const payload: WebKeyActivatedPayload = {
    active_from: now.toISOString(),
    active_until: until.toISOString(),
    publish_until: new Date(until.getTime() + window.publishAfterMs).toISOString(),
  };
  events.push(event(instanceId, kid, WebKeyEvent.activated, { ...payload }));
  return events;
}

/**
 * Deletes a key that does not sign, with its private key. NOT_FOUND when it is not a published key of the
 * instance; FAILED_PRECONDITION for the key that signs now.
 */
export async function removeWebKey(
  tx: Queryable,
  instanceId: string,
  rows: WebKeyRow[],
  kid: string,
  now: number,
): Promise<NewEvent> {
  const target = rows.find((r) => r.id === kid && isPublished(r, now));
  if (!target) throw new NotFoundError("web key not found");
  if (signingRow(rows, now)?.id === kid)
    throw new FailedPreconditionError("the active web key cannot be deleted; activate another key first");
  await eraseSecret(tx, instanceId, kid);
  const payload: WebKeyRemovedPayload = { reason: "deleted" };
  return event(instanceId, kid, WebKeyEvent.removed, { ...payload });
}

async function eraseSecret(tx: Queryable, instanceId: string, kid: string): Promise<void> {
  await tx.query("DELETE FROM oidc_signing_key_secrets WHERE instance_id = $1 AND id = $2", [
    instanceId,
    kid,
  ]);
}
