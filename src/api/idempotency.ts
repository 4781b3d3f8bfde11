/**
 * Safe retries (docs/api.md "Safe retries"): a write sent with an `Idempotency-Key` header (gRPC metadata
 * `idempotency-key`) is applied once per caller and key; retrying it with the same key and the same request
 * answers the first answer again, over any protocol, with `Idempotent-Replayed: true`.
 *
 * How (docs/architecture.md "Idempotency keys"):
 * - The interceptor runs inside authentication and validation, so the key is scoped to the authenticated
 *   caller (instance + user, or system user), and malformed requests never reach it.
 * - The request's fingerprint is an HMAC of the full method name and the request message in binary
 *   protobuf, so REST, gRPC, gRPC-web and Connect calls of the same request match.
 * - The key's row is claimed by the first `EventStore.push` of the call, in its transaction (a PushClaim,
 *   src/eventstore/claim.ts): a key exists exactly when the call's first write committed. Calls that write
 *   nothing (reads, rejected input, errors before any write) leave no row, and a retry simply runs again.
 * - The answer (the response message and REST status, or the error after a write) is stored right after
 *   the implementation returns, sealed with AES-256-GCM under a key derived from the Idempotency-Key.
 * - Calls without the header run exactly as before: no query, no claim.
 */
import { create, type DescMethod, fromBinary, getOption, isMessage, toBinary } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import {
  type Code as ConnectCode,
  ConnectError,
  type ContextValues,
  type Interceptor,
  type StreamResponse,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import { deriveKey, hmacSha256, seal, unseal } from "../crypto/seal.ts";
import { constantTimeEqual, sha256 } from "../crypto/tokens.ts";
import {
  Code,
  IdempotencyAnswerLostError,
  IdempotencyKeyInProgressError,
  IdempotencyKeyReusedError,
  InternalError,
  InvalidArgumentError,
  PlatformError,
} from "../errors.ts";
import type { PushClaim } from "../eventstore/claim.ts";
import { withPushClaim } from "../eventstore/claim.ts";
import { http } from "../gen/google/api/annotations_pb.ts";
import type { Queryable } from "../storage/database.ts";
import type { IdempotencyKeyId, IdempotencyRecord, IdempotencyStore } from "../storage/idempotency.ts";
import { cannedResponseKey, httpStatusKey, loggerKey } from "./context.ts";

/** The request header (and gRPC metadata key) carrying the key. */
export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";
/** Set on every replayed answer, success or error. */
export const IDEMPOTENT_REPLAYED_HEADER = "idempotent-replayed";

const VALID_KEY = /^[\x21-\x7e]{1,255}$/;
/**
 * A claimed key without answer counts as in progress when another process claimed it less than this ago
 * and that process still runs (its lease, Database.isProcessAlive).
 */
const DEFAULT_IN_FLIGHT_MS = 60_000;

export interface IdempotencyOptions {
  store: IdempotencyStore;
  /** The scope of the caller's keys; undefined for an unauthenticated call (the header is then ignored). */
  callerScope(values: ContextValues): { instanceId: string; caller: string } | undefined;
  /** See DEFAULT_IN_FLIGHT_MS. */
  inFlightMs?: number;
}

/** What is sealed in a row: the answer of the first call. */
type StoredAnswer =
  | { kind: "response"; message: string; httpStatus?: number }
  | { kind: "error"; code: number; message: string; httpStatus: number };

/**
 * RPCs that only read: the header is ignored there, like on GET in Stripe's and ZITADEL's APIs (a read
 * retried is simply read again). A read is an RPC declared `idempotency_level = NO_SIDE_EFFECTS`, mapped
 * to GET, or named Get*, List*, Search* or Resolve* (the naming rules of the API, docs/api.md).
 */
export function isReadOnly(method: DescMethod): boolean {
  if (method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS) return true;
  if (getOption(method, http).pattern.case === "get") return true;
  return /^(Get|List|Search|Resolve)[A-Z]/.test(method.name);
}

/** The interceptor; place it after authentication and validation (apiInterceptors' `inner`). */
export function idempotencyInterceptor(options: IdempotencyOptions): Interceptor {
  const { store } = options;
  const inFlightMs = options.inFlightMs ?? DEFAULT_IN_FLIGHT_MS;
  /** Calls this process is running, by key (`rowKey`): twins in one process share a key. */
  const running = new Map<string, number>();
  const readOnly = new Map<DescMethod, boolean>();

  return (next) => async (req) => {
    if (req.stream) return next(req);
    const key = req.header.get(IDEMPOTENCY_KEY_HEADER);
    if (key === null) return next(req);
    let read = readOnly.get(req.method);
    if (read === undefined) {
      read = isReadOnly(req.method);
      readOnly.set(req.method, read);
    }
    if (read) return next(req);
    if (!VALID_KEY.test(key)) {
      throw new InvalidArgumentError("must be 1 to 255 visible ASCII characters", "Idempotency-Key");
    }
    const scope = options.callerScope(req.contextValues);
    if (!scope) return next(req);

    const secrets = keySecrets(key, scope);
    const id: IdempotencyKeyId = { ...scope, keyHash: sha256(key) };
    const method = `/${req.service.typeName}/${req.method.name}`;
    const fingerprint = hmacSha256(secrets.fingerprint, method, toBinary(req.method.input, req.message));
    const aad = `${id.instanceId}\u0000${id.caller}\u0000${id.keyHash}\u0000${method}`;
    const log = req.contextValues.get(loggerKey);

    const answerFrom = async (row: IdempotencyRecord): Promise<UnaryResponse> => {
      if (!constantTimeEqual(row.fingerprint, fingerprint)) {
        throw new IdempotencyKeyReusedError(
          "Idempotency-Key: already used for a different request; send a new key with a new request",
        );
      }
      if (row.response === undefined) {
        // Another process's call runs on only while that process does (its lease), and not for ever: a
        // process whose database connection is cut off keeps its lease until the server notices.
        const inProgress =
          row.claimedBy === store.processId
            ? running.has(rowKey(id))
            : Date.now() - row.claimedAt.getTime() < inFlightMs && (await store.claimantAlive(row.claimedBy));
        if (inProgress) {
          throw new IdempotencyKeyInProgressError(
            "a request with this Idempotency-Key is in progress; retry later",
          );
        }
        const what = row.resourceId ? ` (it wrote resource ${row.resourceId})` : "";
        throw new IdempotencyAnswerLostError(
          `the request with this Idempotency-Key was applied${what} but its answer was lost; read the resource instead of retrying`,
        );
      }
      let answer: StoredAnswer;
      try {
        answer = JSON.parse(unseal(secrets.response, row.response, aad).toString("utf8")) as StoredAnswer;
      } catch (cause) {
        throw new InternalError("the stored answer of this Idempotency-Key cannot be read", cause);
      }
      return replay(req, answer, next);
    };

    await store.purgeExpired();
    const existing = await store.find(id);
    if (existing) return answerFrom(existing);

    const claim = new KeyClaim(store, id, method, fingerprint);
    const complete = async (answer: StoredAnswer) => {
      try {
        const sealed = seal(secrets.response, Buffer.from(JSON.stringify(answer), "utf8"), aad);
        await store.complete(id, sealed);
      } catch (err) {
        // The call's answer still goes out; a retry will learn that it was applied but not what it answered.
        log?.error({ err }, `storing the answer of an Idempotency-Key of ${method} failed`);
      }
    };
    const runningKey = rowKey(id);
    running.set(runningKey, (running.get(runningKey) ?? 0) + 1);
    try {
      let res: UnaryResponse;
      try {
        res = (await withPushClaim(claim, () => next(req))) as UnaryResponse;
      } catch (error) {
        if (claim.conflicted) {
          // A twin with the same key won the claim: answer as a retry arriving now would be answered.
          const row = await store.find(id);
          if (row) return answerFrom(row);
        }
        if (claim.bound) await complete(errorAnswer(error));
        throw error;
      }
      if (claim.bound) {
        const message = isMessage(res.message, req.method.output)
          ? res.message
          : create(req.method.output, res.message);
        await complete({
          kind: "response",
          message: Buffer.from(toBinary(req.method.output, message)).toString("base64"),
          httpStatus: req.contextValues.get(httpStatusKey),
        });
      }
      return res;
    } finally {
      claim.close();
      const left = (running.get(runningKey) ?? 1) - 1;
      if (left > 0) running.set(runningKey, left);
      else running.delete(runningKey);
    }
  };
}

function rowKey(id: IdempotencyKeyId): string {
  return `${id.instanceId}\u0000${id.caller}\u0000${id.keyHash}`;
}

/**
 * Keys derived from the Idempotency-Key (HKDF, salted with the caller's scope): only a caller presenting the
 * key again can match a request to the row or read its answer; the database alone reveals neither.
 */
function keySecrets(key: string, scope: { instanceId: string; caller: string }) {
  const salt = `platform idempotency\u0000${scope.instanceId}\u0000${scope.caller}`;
  return {
    fingerprint: deriveKey(key, salt, "request fingerprint"),
    response: deriveKey(key, salt, "response"),
  };
}

/** The stored form of an error the call threw after its write committed (as the client saw it). */
function errorAnswer(error: unknown): StoredAnswer {
  const platformError = [error, (error as { cause?: unknown })?.cause].find(
    (e) => e instanceof PlatformError,
  );
  if (platformError) {
    return {
      kind: "error",
      code: platformError.code,
      message: platformError.message,
      httpStatus: platformError.httpStatus,
    };
  }
  if (error instanceof ConnectError) {
    return { kind: "error", code: error.code, message: error.rawMessage, httpStatus: 0 };
  }
  return { kind: "error", code: Code.INTERNAL, message: "internal error", httpStatus: 500 };
}

/** The first answer again, marked as replayed. */
async function replay(
  req: UnaryRequest,
  answer: StoredAnswer,
  next: (req: UnaryRequest) => Promise<StreamResponse | UnaryResponse>,
): Promise<UnaryResponse> {
  if (answer.kind === "error") {
    const original =
      answer.httpStatus > 0
        ? new PlatformError(answer.code as Code, answer.message, { httpStatus: answer.httpStatus })
        : undefined;
    throw new ConnectError(
      answer.message,
      answer.code as ConnectCode,
      { [IDEMPOTENT_REPLAYED_HEADER]: "true" },
      undefined,
      original,
    );
  }
  if (answer.httpStatus !== undefined) req.contextValues.set(httpStatusKey, answer.httpStatus);
  // Through `next`, so that the response carries the headers the protocol sets; the implementation is skipped.
  req.contextValues.set(
    cannedResponseKey,
    fromBinary(req.method.output, Buffer.from(answer.message, "base64")),
  );
  const res = (await next(req)) as UnaryResponse;
  res.header.set(IDEMPOTENT_REPLAYED_HEADER, "true");
  return res;
}

/**
 * The call's claim of its key, written by the first push that commits events (src/eventstore/claim.ts).
 * States: open → claiming (a push transaction carries it) → bound (committed) / open again (rolled back);
 * closed once the call has answered, so later pushes (e.g. work the call left running) never claim it.
 */
class KeyClaim implements PushClaim {
  private state: "open" | "claiming" | "bound" | "closed" = "open";
  /** A concurrent call with the same key claimed it first. */
  conflicted = false;

  constructor(
    private readonly store: IdempotencyStore,
    private readonly id: IdempotencyKeyId,
    private readonly method: string,
    private readonly fingerprint: string,
  ) {}

  get bound(): boolean {
    return this.state === "bound";
  }

  async enter(tx: Queryable): Promise<boolean> {
    // Two pushes of one call at once: the first carries the claim (no RPC pushes concurrently today).
    if (this.state !== "open") return false;
    this.state = "claiming";
    let claimed: boolean;
    try {
      claimed = await this.store.claim(tx, this.id, this.method, this.fingerprint);
    } catch (error) {
      this.state = "open";
      throw error;
    }
    if (!claimed) {
      this.state = "closed";
      this.conflicted = true;
      throw new IdempotencyKeyInProgressError(
        "a request with this Idempotency-Key is in progress; retry later",
      );
    }
    return true;
  }

  async leave(tx: Queryable, stored: { aggregateId: string }[]): Promise<void> {
    if (stored.length === 0) await this.store.release(tx, this.id);
    else await this.store.setResource(tx, this.id, stored[0].aggregateId);
  }

  settle(bound: boolean): void {
    if (this.state === "claiming") this.state = bound ? "bound" : "open";
  }

  close(): void {
    if (this.state !== "bound") this.state = "closed";
  }
}
