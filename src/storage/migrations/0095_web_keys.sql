-- Web keys: the OIDC signing keys become event-sourced (aggregate `web_key`), so the web keys API can create,
-- activate and delete them and every change is audited. `oidc_signing_keys` turns into the read model of
-- the `web_keys` projection (public parts and signing windows); the sealed private keys move to a table of
-- their own, written by the commands in the transaction of the events, never carried by an event.

CREATE TABLE oidc_signing_key_secrets (
  instance_id text NOT NULL,
  id          text NOT NULL, -- the kid
  private_key text NOT NULL, -- sealed JWK (src/crypto/masterkey.ts), associated data oidc_signing_keys/<instance>/<kid>
  PRIMARY KEY (instance_id, id)
);

-- Keys no longer published are of no use; the others move over and get the event that adds them.
DELETE FROM oidc_signing_keys WHERE publish_until <= now();

INSERT INTO oidc_signing_key_secrets (instance_id, id, private_key)
SELECT instance_id, id, private_key FROM oidc_signing_keys;

INSERT INTO events (instance_id, aggregate_type, aggregate_id, sequence, event_type, payload, creator, resource_owner, created_at)
SELECT instance_id, 'web_key', id, 1, 'web_key.added',
       jsonb_build_object(
         'alg', alg,
         'config', '{"rsa": {"bits": 2048, "hasher": "SHA256"}}'::jsonb,
         'public_jwk', public_jwk,
         'active_from', active_from,
         'active_until', active_until,
         'publish_until', publish_until,
         'automatic', true),
       'system', instance_id, created_at
FROM oidc_signing_keys
ORDER BY created_at, id;

ALTER TABLE oidc_signing_keys
  DROP COLUMN private_key,
  ALTER COLUMN active_from DROP NOT NULL,   -- unset: created through the API, never activated
  ALTER COLUMN active_until DROP NOT NULL,
  ALTER COLUMN publish_until DROP NOT NULL, -- unset: published until deleted
  ADD COLUMN config jsonb NOT NULL DEFAULT '{"rsa": {"bits": 2048, "hasher": "SHA256"}}',
  ADD COLUMN changed_at timestamptz,
  ADD COLUMN sequence bigint NOT NULL DEFAULT 1;
UPDATE oidc_signing_keys SET changed_at = created_at;
ALTER TABLE oidc_signing_keys
  ALTER COLUMN changed_at SET NOT NULL,
  ALTER COLUMN config DROP DEFAULT,
  ALTER COLUMN sequence DROP DEFAULT;
