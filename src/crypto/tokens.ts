import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

/** A high-entropy secret (default 32 bytes = 256 bits), base64url. */
export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString("base64url");
}

/** Tokens and client secrets are stored as SHA-256 (they are random, so no slow hash is needed). */
export function sha256(value: string): string {
  return createHash("sha256").update(value).digest("base64url");
}

export function constantTimeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/** A readable random password that meets the default complexity policy. */
export function generatePassword(): string {
  return `${randomBytes(12).toString("base64url")}-Aa1!`;
}
