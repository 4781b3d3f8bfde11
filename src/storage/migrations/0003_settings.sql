-- Settings of every context (system, instance, organization), one row per context and category, holding
-- only the values set in that context; resolving walks system → instance → organization.
CREATE TABLE settings (
  instance_id text        NOT NULL, -- '' for the system context
  owner_type  smallint    NOT NULL, -- OwnerType: 1 system, 2 instance, 3 org
  owner_id    text        NOT NULL,
  category    text        NOT NULL, -- 'language', 'features', ...
  settings    jsonb       NOT NULL DEFAULT '{}',
  changed_at  timestamptz NOT NULL,
  sequence    bigint      NOT NULL,
  position    bigint      NOT NULL,
  PRIMARY KEY (instance_id, owner_type, owner_id, category)
);
