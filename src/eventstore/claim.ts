/**
 * A row a call must write in the same transaction as its first events, carried from the API layer to
 * `EventStore.push` by AsyncLocalStorage, so that no command or service has to pass it along. The API's
 * idempotency keys use it (src/api/idempotency.ts): the key is bound to the write atomically, so a key
 * exists exactly when the call's first write committed. The event store knows nothing else about it.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { Queryable } from "../storage/database.ts";
import type { StoredEvent } from "./types.ts";

export interface PushClaim {
  /**
   * Called in each push transaction before its command runs. Returns true when this push carries the
   * claim (it wrote its row), false when the claim is already bound or another push of the call carries
   * it. Throws to fail the push (e.g. a concurrent call holds the same claim).
   */
  enter(tx: Queryable): Promise<boolean>;
  /**
   * Called in the same transaction after the events were appended, only when `enter` returned true.
   * `stored` is empty when the command returned no events: the claim must then be undone.
   */
  leave(tx: Queryable, stored: StoredEvent[]): Promise<void>;
  /** Called after the transaction, only when `enter` returned true: whether it committed events. */
  settle(bound: boolean): void;
}

const claims = new AsyncLocalStorage<PushClaim>();

/** Runs `fn` with `claim` as the claim of every push it makes (until the claim declines in `enter`). */
export function withPushClaim<T>(claim: PushClaim, fn: () => T): T {
  return claims.run(claim, fn);
}

/** The claim of the current call, if any. */
export function currentPushClaim(): PushClaim | undefined {
  return claims.getStore();
}

/**
 * Runs `fn` outside the current call's claim: for writes the system makes on its own while serving a call
 * (e.g. the next OIDC signing key), which must not carry or consume the call's idempotency key.
 */
export function outsideCall<T>(fn: () => T): T {
  return claims.exit(fn);
}
