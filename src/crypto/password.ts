import { hash, verify } from "@node-rs/argon2";

// OWASP's argon2id baseline (19 MiB, t=2, p=1).
// algorithm 2 = Argon2id (the package exports it as a const enum, which isolated modules cannot read).
const options = { algorithm: 2, memoryCost: 19456, timeCost: 2, parallelism: 1 };

export function hashPassword(password: string): Promise<string> {
  return hash(password, options);
}

/** Constant-time check of a password against an argon2id hash; false for a malformed hash. */
export async function verifyPassword(passwordHash: string, password: string): Promise<boolean> {
  try {
    return await verify(passwordHash, password);
  } catch {
    return false;
  }
}
