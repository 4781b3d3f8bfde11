-- Organizations, domains and instances APIs: domain IDs, validation tokens and versions of org domains.
ALTER TABLE org_domains ADD COLUMN id text;
ALTER TABLE org_domains ADD COLUMN is_generated boolean NOT NULL DEFAULT false;
ALTER TABLE org_domains ADD COLUMN validation_token text NOT NULL DEFAULT '';
ALTER TABLE org_domains ADD COLUMN validation_type smallint NOT NULL DEFAULT 0; -- 1 HTTP, 2 DNS
ALTER TABLE org_domains ADD COLUMN changed_at timestamptz;
ALTER TABLE org_domains ADD COLUMN sequence bigint NOT NULL DEFAULT 0;

-- Rows projected before this migration: the domain name is their ID (as the projection does for events
-- without `domain_id`).
UPDATE org_domains d SET
  id = coalesce(
    (SELECT e.payload->>'domain_id' FROM events e
      WHERE e.instance_id = d.instance_id AND e.aggregate_type = 'org' AND e.aggregate_id = d.org_id
        AND e.event_type = 'org.domain.added' AND lower(e.payload->>'domain') = d.domain
      ORDER BY e.sequence DESC LIMIT 1),
    d.domain),
  is_generated = EXISTS (
    SELECT 1 FROM events e
     WHERE e.instance_id = d.instance_id AND e.aggregate_type = 'org' AND e.aggregate_id = d.org_id
       AND e.event_type = 'org.domain.added' AND lower(e.payload->>'domain') = d.domain
       AND e.payload->>'generated' = 'true'),
  changed_at = d.created_at;
ALTER TABLE org_domains ALTER COLUMN id SET NOT NULL;
ALTER TABLE org_domains ALTER COLUMN changed_at SET NOT NULL;
CREATE UNIQUE INDEX org_domains_id_idx ON org_domains (instance_id, id);
CREATE INDEX org_domains_domain_idx ON org_domains (instance_id, domain);
CREATE INDEX instances_created_idx ON instances (created_at);
