-- Branding images (docs/branding.md): content-addressed per instance, written by the branding settings
-- command in the transaction of its `settings.changed` event, which names an image by its SHA-256 and media
-- type only (events stay small). Not a read model: a projection rebuild leaves the rows alone; they go with
-- their instance. Rows no setting names any more stay (an image set again needs no upload to be served, and
-- an older URL in a sent e-mail keeps working).
CREATE TABLE branding_assets (
  instance_id  text        NOT NULL,
  sha256       text        NOT NULL, -- lower-case hexadecimal SHA-256 of content
  content_type text        NOT NULL, -- image/png, image/jpeg, image/webp or image/svg+xml
  content      bytea       NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (instance_id, sha256)
);
