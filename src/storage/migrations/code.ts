/**
 * Steps of migrations that SQL cannot express, run right after the SQL file of the same version, in the
 * same transaction (src/storage/migrate.ts).
 */
import { USERNAME_CONSTRAINT, usernameKey } from "../../domain/user/username.ts";
import type { Queryable } from "../database.ts";

export type MigrationStep = (tx: Queryable) => Promise<void>;

const BATCH = 500;

/**
 * 0087: every user's `username_key`, and the `username` unique constraints rewritten to those keys (they
 * held JavaScript's lowercase). Two existing users whose names now fold to the same key (`admin` and
 * `ａｄｍｉｎ`) keep both their accounts and one constraint row; a login name then finds the user whose
 * username is exactly the one typed, else the older one (docs/operations.md, "Usernames").
 */
async function fillUsernameKeys(tx: Queryable): Promise<void> {
  const users = await tx.query<{ instance_id: string; id: string; username: string }>(
    "SELECT instance_id, id, username FROM users ORDER BY instance_id, created_at, id",
  );
  await tx.query("DELETE FROM unique_constraints WHERE unique_type = $1", [USERNAME_CONSTRAINT]);
  for (let i = 0; i < users.length; i += BATCH) {
    const batch = users.slice(i, i + BATCH);
    const instances = batch.map((u) => u.instance_id);
    const keys = batch.map((u) => usernameKey(u.username));
    await tx.query(
      `UPDATE users u SET username_key = v.key
       FROM unnest($1::text[], $2::text[], $3::text[]) AS v(instance_id, id, key)
       WHERE u.instance_id = v.instance_id AND u.id = v.id`,
      [instances, batch.map((u) => u.id), keys],
    );
    await tx.query(
      `INSERT INTO unique_constraints (instance_id, unique_type, unique_field)
       SELECT v.instance_id, $3, v.key FROM unnest($1::text[], $2::text[]) AS v(instance_id, key)
       ON CONFLICT DO NOTHING`,
      [instances, keys, USERNAME_CONSTRAINT],
    );
  }
  await tx.query("ALTER TABLE users ALTER COLUMN username_key SET NOT NULL");
}

export const migrationSteps: Record<number, MigrationStep> = {
  87: fillUsernameKeys,
};
