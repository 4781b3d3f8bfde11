import { closeSync, existsSync, fsyncSync, linkSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import path from "node:path";
import { ADMIN_CLIENT_USERNAME } from "../bootstrap.ts";
import type { Config } from "../config.ts";
import { randomToken, sha256 } from "../crypto/tokens.ts";
import { addMembershipEvent, changeMembershipEvents, foldMembership } from "../domain/membership/commands.ts";
import { ContextType, MEMBERSHIP } from "../domain/membership/events.ts";
import { addMachineEvent, addPatEvent, foldUser } from "../domain/user/commands.ts";
import { AccessTokenType, USER, UserState, UserType } from "../domain/user/events.ts";
import { EventStore } from "../eventstore/eventstore.ts";
import type { CommandTx, NewEvent } from "../eventstore/types.ts";
import { newId } from "../id.ts";
import { projections } from "../query/projections/index.ts";
import type { Database } from "../storage/database.ts";
import { adminSocketPath, requestAdminToken } from "./admin-socket.ts";
import { CommandError, commandInstance, openForCommand, ServerRunningError } from "./database.ts";

export interface AdminTokenOptions {
  /** Where the token goes: a file (created with mode 0600), or `-` for standard output. */
  out: string;
  instanceId?: string;
  /** An existing machine user to add the token to; without it `admin-client`, created when missing. */
  username?: string;
  /** Replace an existing file. */
  force?: boolean;
}

const OWNER_ROLE = "IAM_OWNER";

/**
 * `platform admin-token`: a personal access token for an administrator of an existing installation, for
 * whoever can reach its database (that access is the authorization). While a server holds the embedded
 * database, the command asks that server over `<dataDir>/admin.sock` (mode 0600: only the data directory's
 * owner can connect; src/cli/admin-socket.ts), which runs `issueAdminToken` as the command would.
 * Without `--user` it makes sure the machine user `admin-client` exists with IAM_OWNER on the instance;
 * with `--user` it only adds a token to that machine user. Every change is an event (creator `system`),
 * as if made through the API.
 */
export async function adminToken(config: Config, options: AdminTokenOptions): Promise<string[]> {
  const toStdout = options.out === "-";
  const target = toStdout ? undefined : path.resolve(options.out);
  if (target && existsSync(target) && !options.force)
    throw new CommandError(`${options.out} exists; choose another file or pass --force to replace it`);
  // A private file next to the target, written once the token exists and then moved into place: a failed
  // run leaves nothing, and the token is never in a file readable by others, not even for a moment.
  const draft = target ? `${target}.${process.pid}.tmp` : undefined;
  const fd = draft ? openDraft(draft, options.out) : undefined;
  let done = false;
  try {
    const { issued, by } = await issueHereOrThroughServer(config, options);
    if (fd === undefined) {
      process.stdout.write(`${issued.token}\n`);
    } else {
      writeSync(fd, `${issued.token}\n`);
      fsyncSync(fd);
      closeSync(fd);
      if (options.force) renameSync(draft!, target!);
      else {
        linkSync(draft!, target!); // fails if the file appeared meanwhile: never overwrite without --force
        rmSync(draft!);
      }
    }
    done = true;
    return [
      ...(by ? [by] : []),
      ...issued.changes.map((change) => `instance ${issued.instanceId}: ${change}`),
      toStdout
        ? `personal access token ${issued.patId} of ${issued.username} written to standard output`
        : `personal access token ${issued.patId} of ${issued.username} written to ${options.out} (mode 0600)`,
    ];
  } finally {
    if (!done && draft) {
      if (fd !== undefined) closeSync(fd);
      rmSync(draft, { force: true });
    }
  }
}

/**
 * Issues the token in this process, or, when a server holds the embedded database and listens on its
 * admin socket, in that server (`by` then says so, for the output).
 */
async function issueHereOrThroughServer(
  config: Config,
  options: AdminTokenOptions,
): Promise<{ issued: Issued; by?: string }> {
  const request = { instanceId: options.instanceId, username: options.username };
  let db: Database;
  try {
    db = await openForCommand(config, "stop it, run this command again, then start it");
  } catch (error) {
    if (!(error instanceof ServerRunningError)) throw error;
    const socketPath = adminSocketPath(config.dataDir);
    if (!existsSync(socketPath))
      throw new CommandError(
        `${error.message} (it listens on no ${socketPath}: still starting, or older than this command)`,
      );
    const issued = await requestAdminToken(socketPath, request);
    return { issued, by: `issued by the running server (pid ${error.pid}) over ${socketPath}` };
  }
  try {
    const eventStore = new EventStore(db, projections);
    return { issued: await issueAdminToken(db, eventStore, request) };
  } finally {
    await db.close();
  }
}

/**
 * Issues the token on an open database: what `platform admin-token` does in its own process and a server
 * does for it over the admin socket (the same events, creator `system`). Refusals are `CommandError`s.
 */
export async function issueAdminToken(
  db: Database,
  eventStore: EventStore,
  request: { instanceId?: string; username?: string },
): Promise<Issued> {
  const instanceId = await commandInstance(db, request.instanceId);
  const issued = await issue(eventStore, instanceId, request.username);
  await eventStore.broadcast.flushed(); // running servers see the changes at once
  return issued;
}

function openDraft(draft: string, out: string): number {
  try {
    return openSync(draft, "wx", 0o600);
  } catch (error) {
    throw new CommandError(`cannot write ${out}: ${(error as Error).message}`);
  }
}

export interface Issued {
  instanceId: string;
  userId: string;
  username: string;
  patId: string;
  token: string;
  /** What changed besides the new token, for the operator. */
  changes: string[];
}

async function issue(
  eventStore: EventStore,
  instanceId: string,
  username: string | undefined,
): Promise<Issued> {
  const token = randomToken();
  const patId = newId();
  let result: Issued | undefined;
  await eventStore.push({ instanceId, creator: "system" }, async (tx) => {
    const changes: string[] = [];
    const events: NewEvent[] = [];
    const name = username ?? ADMIN_CLIENT_USERNAME;
    const found = await tx.query<{ id: string }>(
      "SELECT id FROM users WHERE instance_id = $1 AND lower(username) = lower($2)",
      [instanceId, name],
    );
    let userId: string;
    let orgId: string;
    if (found[0]) {
      const user = foldUser(await tx.load(USER, found[0].id));
      if (!user) throw new CommandError(`no user ${name} in instance ${instanceId}`);
      if (user.type !== UserType.machine)
        throw new CommandError(
          `${user.username} is a human user; personal access tokens are for machine users`,
        );
      if (user.state !== UserState.active)
        throw new CommandError(
          `${user.username} is ${user.state === UserState.locked ? "locked" : "deactivated"}; its tokens would not work`,
        );
      userId = user.id;
      orgId = user.orgId;
      if (username === undefined) events.push(...(await grantOwner(tx, instanceId, userId, name, changes)));
      else changes.push(`${user.username} keeps its roles (${await describeRoles(tx, instanceId, userId)})`);
    } else {
      if (username !== undefined)
        throw new CommandError(
          `no user ${username} in instance ${instanceId}; leave out --user to create ${ADMIN_CLIENT_USERNAME}`,
        );
      const instance = await tx.query<{ default_org_id: string | null }>(
        "SELECT default_org_id FROM instances WHERE id = $1",
        [instanceId],
      );
      if (!instance[0]?.default_org_id)
        throw new CommandError(`instance ${instanceId} has no default organization`);
      userId = newId();
      orgId = instance[0].default_org_id;
      events.push(
        addMachineEvent(userId, orgId, {
          username: name,
          name: "Platform administration client",
          access_token_type: AccessTokenType.bearer,
        }),
        addMembershipEvent(newId(), instanceId, {
          context_type: ContextType.instance,
          context_id: instanceId,
          user_id: userId,
          roles: [OWNER_ROLE],
        }),
      );
      changes.push(`created machine user ${name} (${userId}) with ${OWNER_ROLE}`);
    }
    events.push(addPatEvent(userId, orgId, { pat_id: patId, token_hash: sha256(token) }));
    result = { instanceId, userId, username: name, patId, token, changes };
    return events;
  });
  return result!;
}

/** Events giving the user IAM_OWNER on the instance (none when it has it). */
async function grantOwner(
  tx: CommandTx,
  instanceId: string,
  userId: string,
  username: string,
  changes: string[],
): Promise<NewEvent[]> {
  const rows = await tx.query<{ id: string }>(
    "SELECT id FROM memberships WHERE instance_id = $1 AND context_type = $2 AND context_id = $1 AND user_id = $3",
    [instanceId, ContextType.instance, userId],
  );
  const membership = rows[0] ? foldMembership(await tx.load(MEMBERSHIP, rows[0].id)) : undefined;
  if (membership?.roles.includes(OWNER_ROLE)) {
    changes.push(`reused machine user ${username} (${userId}), which holds ${OWNER_ROLE}`);
    return [];
  }
  changes.push(`reused machine user ${username} (${userId}) and gave it ${OWNER_ROLE}`);
  if (membership) return changeMembershipEvents(membership, [...membership.roles, OWNER_ROLE]);
  return [
    addMembershipEvent(newId(), instanceId, {
      context_type: ContextType.instance,
      context_id: instanceId,
      user_id: userId,
      roles: [OWNER_ROLE],
    }),
  ];
}

/** The user's roles in a line: `IAM_OWNER on the instance, ORG_OWNER in organization 123`. */
async function describeRoles(tx: CommandTx, instanceId: string, userId: string): Promise<string> {
  const rows = await tx.query<{ context_type: number; context_id: string; roles: string[] }>(
    "SELECT context_type, context_id, roles FROM memberships WHERE instance_id = $1 AND user_id = $2 ORDER BY created_at",
    [instanceId, userId],
  );
  if (rows.length === 0) return "none: the token can call nothing but what any authenticated caller may";
  const where = (type: number, id: string) =>
    type === ContextType.instance
      ? "on the instance"
      : type === ContextType.org
        ? `in organization ${id}`
        : `in project ${id}`;
  return rows.map((r) => `${r.roles.join(" ")} ${where(Number(r.context_type), r.context_id)}`).join(", ");
}
