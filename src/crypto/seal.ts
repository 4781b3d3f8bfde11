/**
 * Keys derived from a client's secret, and data sealed under them (used for idempotency keys: the stored
 * answer of a call can only be read by whoever presents the Idempotency-Key again, src/api/idempotency.ts).
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from "node:crypto";

const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** A 256-bit key for one purpose, derived from `secret` with HKDF-SHA256 (salt: where it is used). */
export function deriveKey(secret: string, salt: string, purpose: string): Buffer {
  return Buffer.from(hkdfSync("sha256", secret, salt, purpose, 32));
}

/** HMAC-SHA256 of the parts (each length-prefixed, so no two lists of parts collide), base64url. */
export function hmacSha256(key: Buffer, ...parts: (string | Uint8Array)[]): string {
  const mac = createHmac("sha256", key);
  for (const part of parts) {
    const bytes = typeof part === "string" ? Buffer.from(part, "utf8") : part;
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    mac.update(length).update(bytes);
  }
  return mac.digest("base64url");
}

/** AES-256-GCM with a random nonce: base64url of nonce ‖ ciphertext ‖ tag; `aad` is authenticated too. */
export function seal(key: Buffer, plaintext: Uint8Array, aad: string): string {
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, nonce);
  cipher.setAAD(Buffer.from(aad, "utf8"));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([nonce, body, cipher.getAuthTag()]).toString("base64url");
}

/** The plaintext of `seal`; throws when the key or `aad` differ or the data was changed. */
export function unseal(key: Buffer, sealed: string, aad: string): Buffer {
  const data = Buffer.from(sealed, "base64url");
  if (data.length < NONCE_BYTES + TAG_BYTES) throw new Error("sealed data too short");
  const decipher = createDecipheriv("aes-256-gcm", key, data.subarray(0, NONCE_BYTES));
  decipher.setAAD(Buffer.from(aad, "utf8"));
  decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
  return Buffer.concat([
    decipher.update(data.subarray(NONCE_BYTES, data.length - TAG_BYTES)),
    decipher.final(),
  ]);
}
