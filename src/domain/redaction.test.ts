import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { SECRET_KEY, withoutSecrets } from "./redaction.ts";

/**
 * Payload fields whose names sound like a secret but are none: the rule keeps them (every other such name
 * must be removed by SECRET_KEY, or be added here with the reason it is safe to show).
 */
const NOT_SECRET: Record<string, string> = {
  access_token_role_assertion: "a setting of an app",
  access_token_type: "bearer or JWT, a setting",
  id_token_role_assertion: "a setting of an app",
  id_token_userinfo_assertion: "a setting of an app",
  is_id_token_mapping: "a setting of an identity provider",
  issued_token_type: "the RFC 8693 type URI of an issued token",
  token_id: "the ID (jti) of an issued token, not the token",
  token_endpoint: "a URL of an identity provider",
  key: "the name of a metadata entry",
  key_id: "the ID of a key, not the key",
  role_keys: "role names",
  password_change_required: "a flag",
  password_changed: "a flag (notification providers: a new SMTP password was stored)",
  passkey_id: "the ID of a passkey, not the key",
  credential_id: "a WebAuthn credential's public ID (the browser sends it with every assertion)",
  private_labeling_setting: "a project setting: whose branding its sign-ins show",
};

/** Field names of the event payload types (src/domain/<aggregate>/events.ts). */
function payloadFieldNames(): string[] {
  const dir = new URL("./", import.meta.url);
  const names = new Set<string>();
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    let source: string;
    try {
      source = readFileSync(new URL(`${entry.name}/events.ts`, dir), "utf8");
    } catch {
      continue;
    }
    for (const [, name] of source.matchAll(/^\s+([a-z][a-z0-9_]*)\??:/gm)) names.add(name);
  }
  return [...names].sort();
}

describe("event payloads leave the server without secrets", () => {
  it("every payload field named like a secret is removed, or known to be none", () => {
    const names = payloadFieldNames();
    assert.ok(names.includes("password_hash") && names.includes("username"), "the event types were read");
    const suspicious = names.filter((n) =>
      /hash|secret|password|token|key|private|seal|credential|cert|signature/i.test(n),
    );
    const unclassified = suspicious.filter((n) => !SECRET_KEY.test(n) && !(n in NOT_SECRET));
    assert.deepEqual(unclassified, [], "classify these payload fields in src/domain/redaction.ts");
    const removedButListed = Object.keys(NOT_SECRET).filter((n) => SECRET_KEY.test(n));
    assert.deepEqual(removedButListed, []);
    for (const name of [
      "password_hash",
      "token_hash",
      "secret_hash",
      "user_agent_hash",
      "validation_token",
      "secret_sealed",
      "hashes",
    ])
      assert.ok(SECRET_KEY.test(name), name);
  });

  it("removes those keys at any depth and keeps everything else", () => {
    assert.deepEqual(
      withoutSecrets({
        username: "a",
        password_hash: "$argon2id$...",
        profile: { display_name: "A", nested: [{ token: "t", token_id: "j", client_secret: "s" }] },
        public_key: "-----BEGIN PUBLIC KEY-----",
        password_change_required: true,
      }),
      {
        username: "a",
        profile: { display_name: "A", nested: [{ token_id: "j" }] },
        password_change_required: true,
      },
    );
    assert.equal(withoutSecrets(null), null);
  });
});
