/**
 * The signature of every call to a target (docs/actions.md):
 *
 *   Platform-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(signing_key, "<t>.<raw body>")>
 *
 * During the grace period after a signing-key rotation the header carries one `v1` per valid key, the
 * current key's first (`t=...,v1=<new>,v1=<old>`), so a target still configured with the old key keeps
 * accepting calls until it is updated. A target accepts a call when any `v1` matches its key and `t` is
 * recent (docs/actions.md "Verifying the signature").
 */
import { createHmac, timingSafeEqual } from "node:crypto";

export const SIGNATURE_HEADER = "platform-signature";
/** Signatures older than this should be rejected by targets. */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

/** The keys a call is signed with: the current one, and the previous one during its grace period. */
export interface SigningKeys {
  current: string;
  previous?: string;
}

function hmac(key: string, timestamp: number, body: string | Buffer): string {
  return createHmac("sha256", key).update(`${timestamp}.`).update(body).digest("hex");
}

/** The header value for `body` signed at `now`. */
export function signatureHeader(keys: SigningKeys, body: string | Buffer, now = Date.now()): string {
  const t = Math.floor(now / 1000);
  const parts = [`t=${t}`, `v1=${hmac(keys.current, t, body)}`];
  if (keys.previous) parts.push(`v1=${hmac(keys.previous, t, body)}`);
  return parts.join(",");
}

/**
 * What a target does (also used by the tests): true when `header` carries a `v1` of `body` under `key`
 * whose `t` is at most `toleranceSeconds` away from now. Compared in constant time.
 */
export function verifySignature(
  header: string | undefined,
  body: string | Buffer,
  key: string,
  options: { now?: number; toleranceSeconds?: number } = {},
): boolean {
  if (!header) return false;
  const fields = header.split(",").map((p) => p.trim().split("="));
  const t = Number(fields.find(([k]) => k === "t")?.[1]);
  if (!Number.isInteger(t)) return false;
  const now = Math.floor((options.now ?? Date.now()) / 1000);
  if (Math.abs(now - t) > (options.toleranceSeconds ?? SIGNATURE_TOLERANCE_SECONDS)) return false;
  const expected = Buffer.from(hmac(key, t, body), "hex");
  return fields
    .filter(([k, v]) => k === "v1" && v !== undefined && /^[0-9a-f]{64}$/.test(v))
    .some(([, v]) => timingSafeEqual(Buffer.from(v, "hex"), expected));
}
