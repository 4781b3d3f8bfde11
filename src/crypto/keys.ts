import { createPublicKey } from "node:crypto";
import { exportPKCS8, exportSPKI, generateKeyPair } from "jose";
import { InvalidArgumentError } from "../errors.ts";

/**
 * The key pair of a JWT client credential (machine user keys, app keys for private_key_jwt): the caller's
 * own public key (PEM, RSA / EC / Ed25519; INVALID_ARGUMENT naming `field` otherwise), normalized to SPKI
 * PEM, or a generated RSA 2048 pair whose private key (PKCS#8 PEM) goes back to the caller once and is never
 * stored.
 */
export async function clientKeyPair(
  publicKeyPem: string | undefined,
  field: string,
): Promise<{ publicKey: string; privateKey?: string }> {
  if (publicKeyPem !== undefined) {
    try {
      const key = createPublicKey(publicKeyPem);
      if (!["rsa", "ec", "ed25519"].includes(key.asymmetricKeyType ?? ""))
        throw new Error("unsupported key type");
      return { publicKey: key.export({ type: "spki", format: "pem" }).toString() };
    } catch {
      throw new InvalidArgumentError("must be a PEM encoded RSA, EC or Ed25519 public key", field);
    }
  }
  const pair = await generateKeyPair("RS256", { modulusLength: 2048, extractable: true });
  return { publicKey: await exportSPKI(pair.publicKey), privateKey: await exportPKCS8(pair.privateKey) };
}

/** A JSON key file (the `key_content` bytes of a create-key answer). */
export function keyFile(content: Record<string, unknown>): Uint8Array {
  return new Uint8Array(Buffer.from(JSON.stringify(content)));
}
