import { NotFoundError } from "../../errors.ts";
import type { Queryable } from "../../storage/database.ts";

/*
 * Removing an organization (or a user) appends events for the things inside it that exist at that moment;
 * a user, membership or project added concurrently lives in another aggregate, so the optimistic lock does
 * not see the conflict. Row locks on the read model close that gap on PostgreSQL (PGlite runs transactions
 * one at a time anyway): the removal takes the row FOR UPDATE before it reads the children, a command that
 * adds a child takes it FOR SHARE. Whichever commits first wins; the other then sees its result (the child
 * is removed too, or the parent is gone: NOT_FOUND). Locks are always taken organization first, then user.
 */

/** In a command adding something to an organization: the organization exists and stays until commit. */
export async function holdOrg(tx: Queryable, instanceId: string, orgId: string): Promise<void> {
  const rows = await tx.query("SELECT 1 FROM orgs WHERE instance_id = $1 AND id = $2 FOR SHARE", [
    instanceId,
    orgId,
  ]);
  if (rows.length === 0) throw new NotFoundError("organization not found");
}

/** In a command adding something to a user (a membership): the user exists and stays until commit. */
export async function holdUser(tx: Queryable, instanceId: string, userId: string): Promise<void> {
  const rows = await tx.query("SELECT 1 FROM users WHERE instance_id = $1 AND id = $2 FOR SHARE", [
    instanceId,
    userId,
  ]);
  if (rows.length === 0) throw new NotFoundError("user not found");
}

/**
 * In the removal of an organization, before reading what it contains: the organization, then its users
 * and its projects (always in this order — organization, user, project — as the FOR SHARE side does, so no
 * deadlock).
 */
export async function lockOrgForRemoval(tx: Queryable, instanceId: string, orgId: string): Promise<void> {
  await tx.query("SELECT 1 FROM orgs WHERE instance_id = $1 AND id = $2 FOR UPDATE", [instanceId, orgId]);
  await tx.query("SELECT 1 FROM users WHERE instance_id = $1 AND org_id = $2 FOR UPDATE", [
    instanceId,
    orgId,
  ]);
  // then its projects (user grants and project grants hold them FOR SHARE / FOR UPDATE: project/locks.ts)
  await tx.query("SELECT 1 FROM projects WHERE instance_id = $1 AND org_id = $2 FOR UPDATE", [
    instanceId,
    orgId,
  ]);
}

/** In the removal of a user, before reading its memberships. */
export async function lockUserForRemoval(tx: Queryable, instanceId: string, userId: string): Promise<void> {
  await tx.query("SELECT 1 FROM users WHERE instance_id = $1 AND id = $2 FOR UPDATE", [instanceId, userId]);
}
