import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

/** Bytes of the master key (AES-256). */
export const MASTER_KEY_BYTES = 32;

/**
 * PLATFORM_MASTERKEY as 32 bytes: 64 hexadecimal characters, or base64 / base64url of 32 bytes, or exactly
 * 32 characters taken as they are (the form ZITADEL uses). The three forms cannot be confused: hex is 64
 * characters long, base64 of 32 bytes 43 or 44, the raw form 32. Undefined when the value is none of them.
 */
export function parseMasterKey(raw: string): Buffer | undefined {
  const value = raw.trim();
  if (/^[0-9a-fA-F]{64}$/.test(value)) return Buffer.from(value, "hex");
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(value)) {
    const bytes = Buffer.from(value.replace(/-/g, "+").replace(/_/g, "/"), "base64");
    if (bytes.length === MASTER_KEY_BYTES) return bytes;
  }
  const utf8 = Buffer.from(raw, "utf8");
  return utf8.length === MASTER_KEY_BYTES ? utf8 : undefined;
}

/** Where the embedded mode keeps a generated master key. */
export function masterKeyFile(dataDir: string): string {
  return path.join(dataDir, "masterkey");
}

/**
 * The master key of an embedded installation without PLATFORM_MASTERKEY: read from `<dataDir>/masterkey`,
 * or generated there (mode 0600) on first start. It must be backed up with the data directory.
 */
export function loadOrCreateMasterKeyFile(dataDir: string): Buffer {
  const file = masterKeyFile(dataDir);
  if (existsSync(file)) {
    const key = parseMasterKey(readFileSync(file, "utf8"));
    if (!key) throw new Error(`PLATFORM_MASTERKEY: ${file} does not hold a 32-byte key`);
    return key;
  }
  mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(MASTER_KEY_BYTES);
  writeFileSync(file, `${key.toString("base64")}\n`, { mode: 0o600, flag: "wx" });
  chmodSync(file, 0o600);
  return key;
}

const VERSION = "v1";

/**
 * Encrypts with AES-256-GCM under the master key. `context` (e.g. instance and key ID) is authenticated
 * but not stored, so a sealed value copied to another row does not open there.
 */
export function seal(masterKey: Buffer, plaintext: string, context: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", masterKey, iv);
  cipher.setAAD(Buffer.from(context));
  const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  return [VERSION, iv, cipher.getAuthTag(), ciphertext]
    .map((part) => (typeof part === "string" ? part : part.toString("base64url")))
    .join(".");
}

/** Opens what `seal` produced with the same key and context; throws when either differs. */
export function unseal(masterKey: Buffer, sealed: string, context: string): string {
  const [version, iv, tag, ciphertext] = sealed.split(".");
  if (version !== VERSION || !iv || !tag || ciphertext === undefined)
    throw new Error("not a sealed value of this version");
  const decipher = createDecipheriv("aes-256-gcm", masterKey, Buffer.from(iv, "base64url"));
  decipher.setAAD(Buffer.from(context));
  decipher.setAuthTag(Buffer.from(tag, "base64url"));
  return Buffer.concat([decipher.update(Buffer.from(ciphertext, "base64url")), decipher.final()]).toString(
    "utf8",
  );
}
