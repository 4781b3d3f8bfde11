-- Usernames are compared by one key computed in JavaScript (src/domain/user/username.ts: NFKC, case
-- folded, invisible characters dropped), for uniqueness and lookup alike. PostgreSQL's lower() follows the
-- database's locale and disagreed with JavaScript (`İ`): the read model's unique index on lower(username)
-- failed where the unique constraint (lowercased in JavaScript) had passed. Uniqueness is the
-- `unique_constraints` row's job alone now; the read model only indexes the key for lookups.
--
-- The key cannot be computed in SQL: the migration's code step (src/storage/migrations/code.ts) fills
-- `username_key` for existing users, rewrites the `username` unique constraints to the keys and then makes
-- the column NOT NULL, in this migration's transaction.
ALTER TABLE users ADD COLUMN username_key text;
DROP INDEX users_username_idx;
CREATE INDEX users_username_key_idx ON users (instance_id, username_key);
