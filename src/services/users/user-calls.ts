/**
 * What every RPC on one user shares: `userCall` (the user, and the caller authorized on it, with the
 * account-control rule) and `onUser` (a command on the user, answering its Details). The users service and
 * its parts (./codes.ts, ./factors.ts, ./passkeys.ts, ./machine-credentials.ts, ./links.ts) take them.
 */

import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { Permission } from "../../auth/permissions.ts";
import { OwnerType } from "../../domain/settings/events.ts";
import { foldUser, type UserAggregate } from "../../domain/user/commands.ts";
import { USER } from "../../domain/user/events.ts";
import { NotFoundError } from "../../errors.ts";
import type { CommandTx, NewEvent, StoredEvent } from "../../eventstore/types.ts";
import type { Details } from "../../gen/platform/object/v3alpha/object_pb.ts";
import { RequestContextSchema } from "../../gen/platform/object/v3alpha/object_pb.ts";
import { type AuthorizedCall, authenticate, authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { resourceDetails } from "../mapping.ts";
import { readUser, type UserRow } from "./read.ts";

/** The user `id`, the caller authorized for `permission` on it (`self`: the user itself may). */
export type UserCall = (
  ctx: HandlerContext,
  id: string,
  permission: Permission,
  options?: { self?: boolean },
) => Promise<{ call: AuthorizedCall; row: UserRow }>;

/** Runs a command on an existing user; answers the user's Details (`detailsId` in place of its ID). */
export type OnUser = (
  call: AuthorizedCall,
  userId: string,
  decide: (user: UserAggregate, tx: CommandTx) => NewEvent[] | Promise<NewEvent[]>,
  detailsId?: string,
) => Promise<Details>;

const orgContext = (orgId: string) =>
  create(RequestContextSchema, { context: { case: "orgId", value: orgId } });

export function userCalls(deps: ServiceDeps): { userCall: UserCall; onUser: OnUser } {
  /**
   * The user `id` of the Host's instance, with the caller authorized for `permission` in the user's
   * organization. 404 when the user is unknown or the caller may not even read it (user.read in its
   * organization), 403 when it may read but lacks `permission`. `self`: the user itself only needs to be
   * authenticated. Every permission but user.read changes the account, so it also needs control over it
   * (403 when the user holds roles the caller does not: no control over a more privileged account).
   */
  async function userCall(
    ctx: HandlerContext,
    id: string,
    permission: Permission,
    options: { self?: boolean } = {},
  ): Promise<{ call: AuthorizedCall; row: UserRow }> {
    const { scope, caller } = await authenticate(deps, ctx);
    const row = scope.instanceId ? await readUser(deps.db, scope.instanceId, id) : undefined;
    if (!row) throw new NotFoundError("user not found");
    const isSelf = options.self === true && caller.kind === "user" && caller.userId === id;
    const call = await authorize(deps, ctx, "authenticated", { ctx: orgContext(row.org_id) });
    if (!isSelf) {
      if (!(await deps.authorizer.can(call.caller, "user.read", call.context)))
        throw new NotFoundError("user not found");
      await deps.authorizer.authorize(call.caller, permission, call.context);
    }
    if (permission !== "user.read")
      await deps.authorizer.requireAccountControl(call.caller, scope.instanceId ?? "", id);
    return { call, row };
  }

  /**
   * Runs a command on an existing user and answers the user's Details after it (the current ones when
   * the command appended nothing). `detailsId` replaces the user ID in Details (a token or key ID).
   */
  async function onUser(
    call: AuthorizedCall,
    userId: string,
    decide: (user: UserAggregate, tx: CommandTx) => NewEvent[] | Promise<NewEvent[]>,
    detailsId = userId,
  ) {
    let before: UserAggregate | undefined;
    const stored = await deps.eventStore.push(
      { instanceId: call.context.type === "system" ? "" : call.context.instanceId, creator: call.creator },
      async (tx) => {
        const user = foldUser(await tx.load(USER, userId));
        if (!user) throw new NotFoundError("user not found");
        before = user;
        return decide(user, tx);
      },
    );
    return userDetails(before!, stored, detailsId);
  }

  function userDetails(user: UserAggregate, stored: StoredEvent[], detailsId = user.id) {
    const last = stored.filter((e) => e.aggregateType === USER && e.aggregateId === user.id).at(-1);
    return resourceDetails({
      id: detailsId,
      sequence: last?.sequence ?? user.sequence,
      changeDate: last?.createdAt ?? user.changeDate,
      owner: { type: OwnerType.org, id: user.orgId },
    });
  }

  return { userCall, onUser };
}
