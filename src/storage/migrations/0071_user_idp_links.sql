-- Links between users and identities at external identity providers (events user.idp.link.added /
-- user.idp.link.removed on the user aggregate; src/query/projections/users.ts). The login UI finds the user
-- of an external identity here; the users API lists a user's links (GET /users/{id}/links).
-- idp_id is not a foreign key: a link to a provider deleted since stays readable (and removable).
CREATE TABLE user_idp_links (
  instance_id       text        NOT NULL,
  user_id           text        NOT NULL,
  org_id            text        NOT NULL,
  idp_id            text        NOT NULL,
  external_user_id  text        NOT NULL,
  external_username text        NOT NULL,
  created_at        timestamptz NOT NULL,
  sequence          bigint      NOT NULL,
  PRIMARY KEY (instance_id, user_id, idp_id),
  -- one external identity links to one user per instance (the event's unique constraint guards it first)
  CONSTRAINT user_idp_links_identity_key UNIQUE (instance_id, idp_id, external_user_id)
);
