-- Searches whose cost follows the page and the filter, not the table (docs/architecture.md, "Searches").
--
-- ListDetails.processed_sequence is one LIMIT 1 lookup per aggregate type on the existing
-- events_instance_type_idx (instance_id, aggregate_type, position): no index is added to `events`, so
-- appends pay nothing for it.

-- The default order (created_at, then id as tiebreaker) of every searchable table, in the instance and per
-- organization, so a page is read from an index in order and stops after offset + limit entries (an
-- index-only scan for the tables searched by late row lookup: only the page's rows are read from the heap).
CREATE INDEX users_created_idx ON users (instance_id, created_at, id);
DROP INDEX users_org_idx;
CREATE INDEX users_org_idx ON users (instance_id, org_id, created_at, id);
DROP INDEX orgs_created_idx;
CREATE INDEX orgs_created_idx ON orgs (instance_id, created_at, id);
CREATE INDEX projects_created_idx ON projects (instance_id, created_at, id);
DROP INDEX projects_org_idx;
CREATE INDEX projects_org_idx ON projects (instance_id, org_id, created_at, id);
CREATE INDEX apps_created_idx ON apps (instance_id, created_at, id);
CREATE INDEX project_grants_created_idx ON project_grants (instance_id, created_at, id);
CREATE INDEX user_grants_created_idx ON user_grants (instance_id, created_at, id);
CREATE INDEX user_grants_org_created_idx ON user_grants (instance_id, org_id, created_at, id);
DROP INDEX user_grants_org_idx;
CREATE INDEX memberships_created_idx ON memberships (instance_id, created_at, id);
DROP INDEX sessions_created_idx;
CREATE INDEX sessions_created_idx ON sessions (instance_id, created_at, id);

-- Prefix and equality filters whatever the database's collation: LIKE 'abc%' can only use a btree in the
-- pattern operator class (text_pattern_ops) unless the collation is C. The search code compares e-mails
-- as `lower(email) = lower($1)` / `lower(email) LIKE lower($1)` (plus the exact comparison for the
-- case-sensitive methods), which is the expression indexed here; usernames by the column itself (exact
-- methods) or by their key (ignore-case methods).
CREATE INDEX users_username_prefix_idx ON users (instance_id, username text_pattern_ops);
CREATE INDEX users_username_key_prefix_idx ON users (instance_id, username_key text_pattern_ops);
CREATE INDEX users_email_prefix_idx ON users (instance_id, lower(email) text_pattern_ops);

-- total_result of the unfiltered search of a table, in the instance (scope '') and per organization
-- (scope = the organization's ID): the sum of the `delta` rows of (instance, resource, scope). Every insert
-- or delete of a counted row adds a +1 / -1 row in the same transaction (the triggers below), so counts
-- are exact and read-your-writes holds, and concurrent writers never wait on one another (no counter row
-- is updated in place, so none is locked until commit). Searches fold a key's rows into one when there
-- are many (src/query/search.ts).
CREATE TABLE search_counts (
  instance_id text   NOT NULL,
  resource    text   NOT NULL,
  scope       text   NOT NULL,
  delta       bigint NOT NULL
);
CREATE INDEX search_counts_key_idx ON search_counts (instance_id, resource, scope) INCLUDE (delta);
-- The three columns are correlated (an organization's scope belongs to one instance and mostly one
-- resource): without their combined statistics the planner multiplies the columns' frequencies, expects
-- thousands of rows for a key that holds one and scans the table.
CREATE STATISTICS search_counts_key_stats (mcv) ON instance_id, resource, scope FROM search_counts;
-- Folding deletes rows: vacuum and analyze after a number of changed rows rather than a fraction of the
-- table, so the index stays clean and the statistics follow the folded table.
ALTER TABLE search_counts SET (
  autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_scale_factor = 0,
  autovacuum_analyze_threshold = 10000, autovacuum_analyze_scale_factor = 0
);

-- Trigger arguments: the resource name, and the column holding the organization ('' for none).
CREATE FUNCTION search_counts_delta() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' OR TG_OP = 'UPDATE' THEN
    INSERT INTO search_counts (instance_id, resource, scope, delta) VALUES (NEW.instance_id, TG_ARGV[0], '', 1);
    IF TG_ARGV[1] <> '' THEN
      INSERT INTO search_counts (instance_id, resource, scope, delta)
        VALUES (NEW.instance_id, TG_ARGV[0], to_jsonb(NEW) ->> TG_ARGV[1], 1);
    END IF;
  END IF;
  IF TG_OP = 'DELETE' OR TG_OP = 'UPDATE' THEN
    INSERT INTO search_counts (instance_id, resource, scope, delta) VALUES (OLD.instance_id, TG_ARGV[0], '', -1);
    IF TG_ARGV[1] <> '' THEN
      INSERT INTO search_counts (instance_id, resource, scope, delta)
        VALUES (OLD.instance_id, TG_ARGV[0], to_jsonb(OLD) ->> TG_ARGV[1], -1);
    END IF;
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER users_search_counts AFTER INSERT OR DELETE ON users
  FOR EACH ROW EXECUTE FUNCTION search_counts_delta('users', 'org_id');
CREATE TRIGGER users_search_counts_moved AFTER UPDATE OF org_id, instance_id ON users
  FOR EACH ROW WHEN (OLD.org_id IS DISTINCT FROM NEW.org_id OR OLD.instance_id IS DISTINCT FROM NEW.instance_id)
  EXECUTE FUNCTION search_counts_delta('users', 'org_id');
CREATE TRIGGER projects_search_counts AFTER INSERT OR DELETE ON projects
  FOR EACH ROW EXECUTE FUNCTION search_counts_delta('projects', 'org_id');
CREATE TRIGGER projects_search_counts_moved AFTER UPDATE OF org_id, instance_id ON projects
  FOR EACH ROW WHEN (OLD.org_id IS DISTINCT FROM NEW.org_id OR OLD.instance_id IS DISTINCT FROM NEW.instance_id)
  EXECUTE FUNCTION search_counts_delta('projects', 'org_id');
CREATE TRIGGER user_grants_search_counts AFTER INSERT OR DELETE ON user_grants
  FOR EACH ROW EXECUTE FUNCTION search_counts_delta('user_grants', 'org_id');
CREATE TRIGGER user_grants_search_counts_moved AFTER UPDATE OF org_id, instance_id ON user_grants
  FOR EACH ROW WHEN (OLD.org_id IS DISTINCT FROM NEW.org_id OR OLD.instance_id IS DISTINCT FROM NEW.instance_id)
  EXECUTE FUNCTION search_counts_delta('user_grants', 'org_id');
CREATE TRIGGER orgs_search_counts AFTER INSERT OR DELETE ON orgs
  FOR EACH ROW EXECUTE FUNCTION search_counts_delta('orgs', '');

INSERT INTO search_counts (instance_id, resource, scope, delta)
  SELECT instance_id, 'users', '', count(*) FROM users GROUP BY instance_id
  UNION ALL SELECT instance_id, 'users', org_id, count(*) FROM users GROUP BY instance_id, org_id
  UNION ALL SELECT instance_id, 'projects', '', count(*) FROM projects GROUP BY instance_id
  UNION ALL SELECT instance_id, 'projects', org_id, count(*) FROM projects GROUP BY instance_id, org_id
  UNION ALL SELECT instance_id, 'user_grants', '', count(*) FROM user_grants GROUP BY instance_id
  UNION ALL SELECT instance_id, 'user_grants', org_id, count(*) FROM user_grants GROUP BY instance_id, org_id
  UNION ALL SELECT instance_id, 'orgs', '', count(*) FROM orgs GROUP BY instance_id;
