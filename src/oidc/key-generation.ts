import { exportJWK, generateKeyPair, type JWK } from "jose";
import { algorithmOf, type WebKeyConfig } from "../domain/web-key/events.ts";

/** The members of a public JWK by key type: what the key set publishes, nothing private. */
const PUBLIC_MEMBERS: Record<string, string[]> = {
  RSA: ["n", "e"],
  EC: ["crv", "x", "y"],
  OKP: ["crv", "x"],
};

/** The public JWK of a key as published: `kty`, its public members, `kid`, `use: sig`, `alg`. */
export function publicJwkOf(jwk: JWK, kid: string, alg: string): JWK {
  const kty = String(jwk.kty);
  const members = PUBLIC_MEMBERS[kty];
  if (!members) throw new Error(`unsupported key type ${kty}`);
  const out: JWK = { kty };
  for (const member of members)
    (out as Record<string, unknown>)[member] = (jwk as Record<string, unknown>)[member];
  return { ...out, kid, use: "sig", alg };
}

/** A new key pair of a configuration, as JWKs (the private one to be sealed, never published). */
export async function generateWebKey(
  config: WebKeyConfig,
  kid: string,
): Promise<{ alg: string; publicJwk: JWK; privateJwk: JWK }> {
  const alg = algorithmOf(config);
  const { publicKey, privateKey } =
    "rsa" in config
      ? await generateKeyPair(alg, { modulusLength: config.rsa.bits, extractable: true })
      : "ed25519" in config
        ? await generateKeyPair("EdDSA", { crv: "Ed25519", extractable: true })
        : await generateKeyPair(alg, { extractable: true });
  return {
    alg,
    publicJwk: publicJwkOf(await exportJWK(publicKey), kid, alg),
    privateJwk: { ...(await exportJWK(privateKey)), kid, alg },
  };
}
