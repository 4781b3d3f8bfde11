-- Identity providers (docs/identity-providers.md): read model of the `idp`
-- aggregate, maintained inline by src/query/projections/idps.ts; the state policies of reusable resources
-- in child contexts (src/query/reusable.ts); the providers' client secrets, sealed with the master key.

CREATE TABLE idps (
  instance_id text        NOT NULL,
  id          text        NOT NULL,
  owner_type  smallint    NOT NULL, -- OwnerType of the owning context: 2 instance, 3 organization
  owner_id    text        NOT NULL, -- instance ID or organization ID
  state       smallint    NOT NULL, -- state in the owning context: 1 active, 2 inactive
  type        smallint    NOT NULL, -- ProviderType: 1 oidc, 4 oauth, 8 codehost_b, 9 codehost_b_self_hosted
  name        text        NOT NULL,
  options     jsonb       NOT NULL, -- is_manual_linking_allowed, is_manual_creation_allowed, is_auto_creation, is_auto_update, auto_linking
  config      jsonb       NOT NULL, -- the type's configuration without the client secret
  created_at  timestamptz NOT NULL,
  changed_at  timestamptz NOT NULL,
  sequence    bigint      NOT NULL,
  PRIMARY KEY (instance_id, id)
);
CREATE INDEX idps_owner_idx ON idps (instance_id, owner_id, created_at);
CREATE INDEX idps_created_idx ON idps (instance_id, created_at);

-- The state policy a child context chose for a reusable resource of its parent context (no row: INHERIT).
-- Written by the projections of the reusable resources (for identity providers: idps.ts).
CREATE TABLE reusable_state_policies (
  instance_id   text        NOT NULL,
  resource_type text        NOT NULL, -- aggregate type of the resource, e.g. `idp`
  resource_id   text        NOT NULL,
  context_id    text        NOT NULL, -- the child context (an organization ID)
  policy        smallint    NOT NULL, -- StatePolicy: 1 ACTIVATE, 2 DEACTIVATE
  changed_at    timestamptz NOT NULL,
  PRIMARY KEY (instance_id, resource_type, resource_id, context_id)
);
CREATE INDEX reusable_state_policies_context_idx ON reusable_state_policies (instance_id, context_id);

-- Not a projection (secrets are never in events): written by the identity provider commands in the
-- transaction of their events, left alone by projection rebuilds. `client_secret` is sealed with the master
-- key (AES-256-GCM, src/crypto/masterkey.ts) bound to the instance and the provider.
CREATE TABLE idp_client_secrets (
  instance_id   text NOT NULL,
  idp_id        text NOT NULL,
  client_secret text NOT NULL,
  PRIMARY KEY (instance_id, idp_id)
);
