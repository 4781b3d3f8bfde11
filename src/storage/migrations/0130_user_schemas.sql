-- User schemas (docs/user-schemas.md): read model of the `user_schema` aggregate, maintained inline by
-- src/query/projections/user-schemas.ts, and the custom data of users (the users projection).

CREATE TABLE user_schemas (
  instance_id             text        NOT NULL,
  id                      text        NOT NULL,
  type                    text        NOT NULL,
  state                   smallint    NOT NULL, -- UserSchemaState: 1 active, 2 inactive
  schema                  jsonb       NOT NULL, -- the JSON Schema as given
  possible_authenticators jsonb       NOT NULL, -- AuthenticatorType numbers
  revision                integer     NOT NULL,
  created_at              timestamptz NOT NULL,
  changed_at              timestamptz NOT NULL,
  sequence                bigint      NOT NULL,
  PRIMARY KEY (instance_id, id)
);
-- Searches of an instance in creation order (the default sort).
CREATE INDEX user_schemas_search_idx ON user_schemas (instance_id, created_at, id);

-- A human user's schema, the revision its data was last checked against, and the data.
ALTER TABLE users ADD COLUMN schema_id text;
ALTER TABLE users ADD COLUMN schema_revision integer;
ALTER TABLE users ADD COLUMN data jsonb;
-- The users search's schema filter, and the check that a schema to remove is not in use.
CREATE INDEX users_schema_idx ON users (instance_id, schema_id, created_at, id) WHERE schema_id IS NOT NULL;
