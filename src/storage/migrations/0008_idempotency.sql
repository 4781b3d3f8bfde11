-- Idempotency keys (src/storage/idempotency.ts, src/api/idempotency.ts): the first answer to a write sent
-- with an `Idempotency-Key`, per caller. The row is claimed in the transaction of the call's first events
-- and the answer stored right after. Nothing here reveals the key or the answer: the key is kept as its
-- SHA-256, the request as an HMAC under a key derived from the Idempotency-Key, the answer sealed with
-- AES-256-GCM under another key derived from it.
CREATE TABLE idempotency_keys (
  instance_id  text        NOT NULL, -- instance of the Host the call came in on ('' without one)
  caller       text        NOT NULL, -- "user:<id>" or "system:<id>"
  key_hash     text        NOT NULL, -- SHA-256 of the Idempotency-Key (base64url)
  method       text        NOT NULL, -- full RPC name, e.g. /platform...PlatformOrganizations/CreateOrganization
  fingerprint  text        NOT NULL, -- HMAC-SHA256 of method + request (binary protobuf)
  resource_id  text,                 -- aggregate ID of the call's first event (named when the answer was lost)
  claimed_by   text        NOT NULL, -- random ID of the process that ran the call
  claimed_at   timestamptz NOT NULL,
  expires_at   timestamptz NOT NULL,
  response     text,                 -- sealed answer (base64url); NULL until the call has answered
  PRIMARY KEY (instance_id, caller, key_hash)
);
CREATE INDEX idempotency_keys_expiry_idx ON idempotency_keys (expires_at);
