/**
 * What of an event's payload may leave the server: the one rule for every reader outside (the audit log,
 * event deliveries to action targets). Events never hold a secret itself, only its hash, but a hash of a
 * low-entropy secret (a password) can be attacked offline, a token's hash is what the server compares
 * presented tokens with, and no reader needs any of them. So these keys are removed at any depth:
 * every key ending in `_hash` (`password_hash`, `token_hash`, `secret_hash`, `user_agent_hash`), lists of
 * hashes (`hashes`: the recovery codes'), secrets sealed with the master key (`secret_sealed`: a TOTP
 * secret; sealed, but no reader needs it), and keys
 * named `secret`, `password`, `token`, `private_key`, `public_key`, `signing_key`, `key_data` or ending in
 * `_secret`, `_password`, `_token` and so on (`validation_token`). Flags and names about secrets stay
 * (`password_change_required`, `client_secret_changed`, `access_token_type`, `token_id`).
 */
export const SECRET_KEY =
  /(_hash$|(^|_)hashes$|_sealed$|(^|_)(secret|password|token|private_key|public_key|signing_key|key_data)$)/i;

/** `payload` without the keys of SECRET_KEY, at any depth. */
export function withoutSecrets(payload: unknown): unknown {
  if (Array.isArray(payload)) return payload.map(withoutSecrets);
  if (payload === null || typeof payload !== "object") return payload;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(payload)) {
    if (!SECRET_KEY.test(key)) out[key] = withoutSecrets(value);
  }
  return out;
}
