/**
 * Web keys: the keys an instance signs ID tokens and JWT access tokens with (aggregate `web_key`, ID = the
 * JWK `kid`, resource owner = the instance). Events carry the public key and the signing window only; the
 * private key is sealed with the master key in `oidc_signing_key_secrets`, written by the command that
 * adds the key, never in an event.
 */
export const WEB_KEY = "web_key";

export const WebKeyEvent = {
  /** A key pair was generated and published; with a window when it is scheduled to sign. */
  added: "web_key.added",
  /** The key signs from `active_from` (an activation through the API or `platform keys rotate`). */
  activated: "web_key.activated",
  /** The key stopped signing at `active_until` (another key was activated). */
  deactivated: "web_key.deactivated",
  /** The key left the key set (deleted, or prepared to follow a key that was replaced). */
  removed: "web_key.removed",
} as const;

/** How a key is generated (stored with the key, and used for the keys the automatic rotation makes). */
export type WebKeyConfig =
  | { rsa: { bits: 2048 | 3072 | 4096; hasher: "SHA256" | "SHA384" | "SHA512" } }
  | { ecdsa: { curve: "P256" | "P384" | "P521" } }
  | { ed25519: Record<string, never> };

/** What new instances sign with: RSA 2048, RS256. */
export const DEFAULT_WEB_KEY_CONFIG: WebKeyConfig = { rsa: { bits: 2048, hasher: "SHA256" } };

/** The JWS algorithm of a configuration. */
export function algorithmOf(config: WebKeyConfig): string {
  if ("rsa" in config) return `RS${config.rsa.hasher.slice(3)}`;
  if ("ecdsa" in config) return { P256: "ES256", P384: "ES384", P521: "ES512" }[config.ecdsa.curve];
  return "EdDSA";
}

/** When a key signs and how long it is published (RFC 3339). */
export interface WebKeyWindow {
  active_from: string;
  active_until: string;
  /** Absent: published until deleted. */
  publish_until?: string;
}

export interface WebKeyAddedPayload extends Partial<WebKeyWindow> {
  alg: string;
  config: WebKeyConfig;
  /** The public JWK as published (kid, use, alg, public parts only). */
  public_jwk: Record<string, unknown>;
  /** Made by the automatic rotation (else by an administrator). */
  automatic?: boolean;
}

export type WebKeyActivatedPayload = WebKeyWindow;

export interface WebKeyDeactivatedPayload {
  active_until: string;
}

export interface WebKeyRemovedPayload {
  /** `deleted` (by an administrator) or `superseded` (prepared to follow a key that was replaced). */
  reason: "deleted" | "superseded";
}

/** The state of a key at a time, from its window (INITIAL, ACTIVE, INACTIVE; REMOVED once unpublished). */
export const WebKeyState = { initial: 1, active: 2, inactive: 3, removed: 4 } as const;
export type WebKeyState = (typeof WebKeyState)[keyof typeof WebKeyState];
