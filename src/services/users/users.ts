import type { HandlerContext } from "@connectrpc/connect";
import { apiService } from "../../api/register.ts";
import { hashPassword, verifyPassword } from "../../crypto/password.ts";
import { removeMembershipEvent } from "../../domain/membership/commands.ts";
import { ContextType } from "../../domain/membership/events.ts";
import { holdOrg, lockUserForRemoval } from "../../domain/org/locks.ts";
import { endSessionsOnPasswordChange } from "../../domain/session/user-sessions.ts";
import { OwnerType } from "../../domain/settings/events.ts";
import {
  addHumanEvent,
  addMachineEvent,
  changeUserEvents,
  changeUsernameEvent,
  metadataEvents,
  removeUserEvent,
  setPasswordEvents,
  userDataEvents,
} from "../../domain/user/commands.ts";
import { type HumanAddedPayload, type UserChangedPayload, UserType } from "../../domain/user/events.ts";
import { machineUsernameProblem } from "../../domain/user/machine-username.ts";
import { checkPasswordPolicy } from "../../domain/user/password.ts";
import { profileChange } from "../../domain/user/profile.ts";
import { changeStateEvents, type StateAction } from "../../domain/user/state.ts";
import { checkUsername } from "../../domain/user/username.ts";
import { decideUserData, NO_DATA } from "../../domain/user-schema/user-data.ts";
import { cascadeRemoveUserGrant, userGrantsWhere } from "../../domain/usergrant/commands.ts";
import { FailedPreconditionError, InvalidArgumentError, NotFoundError } from "../../errors.ts";
import type { NewEvent } from "../../eventstore/types.ts";
import {
  type CreateHuman,
  type PatchUser,
  PlatformUsers,
} from "../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import { newId } from "../../id.ts";
import { authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { resourceDetails } from "../mapping.ts";
import { codeRpcs } from "./codes.ts";
import { dataChange, onlyData, roleOn, visibleData } from "./custom-data.ts";
import { factorRpcs } from "./factors.ts";
import { linkRpcs } from "./links.ts";
import { machineCredentialRpcs } from "./machine-credentials.ts";
import { passkeyRpcs } from "./passkeys.ts";
import { readMetadata, toUser } from "./read.ts";
import { userSearchRpcs } from "./search.ts";
import { userCalls } from "./user-calls.ts";

/** "" and undefined are "not given". */
const given = (value: string | undefined): string | undefined => (value === "" ? undefined : value);

/**
 * PlatformUsers: human and machine users of organizations, their state, password, metadata and machine
 * credentials (client secret, keys, personal access tokens).
 */
export function usersService(deps: ServiceDeps) {
  const { userCall, onUser } = userCalls(deps);

  async function stateAction(ctx: HandlerContext, id: string, action: StateAction) {
    const { call } = await userCall(ctx, id, "user.write");
    return { details: await onUser(call, id, (user) => changeStateEvents(user, action)) };
  }

  async function humanPayload(username: string, human: CreateHuman): Promise<HumanAddedPayload> {
    const profile = human.profile!;
    const password = human.password;
    if (password) {
      checkPasswordPolicy(password.password, deps.config.passwordMinLength, "user.human.password.password");
    }
    return {
      username,
      profile: {
        given_name: profile.givenName,
        family_name: profile.familyName,
        display_name: given(profile.displayName) ?? `${profile.givenName} ${profile.familyName}`,
        nick_name: given(profile.nickName),
        preferred_language: given(profile.preferredLanguage),
      },
      email: { address: human.email!.address, is_verified: human.email!.isVerified },
      phone: human.phone ? { number: human.phone.number, is_verified: human.phone.isVerified } : undefined,
      password_hash: password ? await hashPassword(password.password) : undefined,
      password_change_required: password ? password.changeRequired : undefined,
    };
  }

  /** PatchUser body → the `user.changed` fields it sets (checked against the user's type). */
  function changeOf(patch: PatchUser | undefined, type: number): UserChangedPayload {
    const change: UserChangedPayload = {};
    const human = patch?.human;
    const machine = patch?.machine;
    if (human && (human.profile || human.email || human.phone)) {
      if (type !== UserType.human)
        throw new FailedPreconditionError("user.human: human fields exist only for human users");
      Object.assign(change, profileChange(human.profile ?? {}));
      // Only the members given change; whether a changed address stays verified is the domain's rule.
      const email = human.email;
      if (email?.address !== undefined) change.email = email.address;
      if (email?.isVerified !== undefined) change.email_verified = email.isVerified;
      const phone = human.phone;
      if (phone?.number === "" && phone.isVerified === true)
        throw new InvalidArgumentError(
          "cannot be true while the number is removed (empty)",
          "user.human.phone.is_verified",
        );
      if (phone?.number !== undefined) change.phone = phone.number || null;
      if (phone?.isVerified !== undefined) change.phone_verified = phone.isVerified;
    }
    if (
      machine &&
      (machine.name !== undefined ||
        machine.description !== undefined ||
        machine.accessTokenType !== undefined)
    ) {
      if (type !== UserType.machine)
        throw new FailedPreconditionError("user.machine: machine fields exist only for machine users");
      if (machine.name !== undefined) change.name = machine.name;
      if (machine.description !== undefined) change.description = machine.description || null;
      if (machine.accessTokenType !== undefined) change.access_token_type = machine.accessTokenType;
    }
    return change;
  }

  const codes = codeRpcs(deps, userCall, onUser);
  return apiService(PlatformUsers, {
    ...codes.rpcs,
    ...factorRpcs(deps, userCall, onUser),
    ...userSearchRpcs(deps),
    ...passkeyRpcs(deps, userCall, onUser),
    ...machineCredentialRpcs(deps, userCall, onUser),
    ...linkRpcs(deps, userCall, onUser),
    async createUser(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", { ctx: req.ctx });
      if (call.context.type === "system")
        throw new InvalidArgumentError("users belong to an organization: choose one with ctx.org_id", "ctx");
      const instanceId = call.context.instanceId;
      // the default organization of the Host's instance comes from the cached directory (invalidated by
      // instance events, across processes too); another instance's (a system caller's ctx) is read
      const hostInstance =
        call.scope.instanceId === instanceId ? await deps.instances.byHost(call.scope.host) : undefined;
      const orgId =
        call.context.type === "instance"
          ? (hostInstance?.id === instanceId ? hostInstance : await deps.instances.byId(instanceId))
              ?.defaultOrgId
          : call.context.orgId;
      if (!orgId) throw new NotFoundError("the instance has no default organization");
      await deps.authorizer.authorize(call.caller, "user.write", { type: "org", instanceId, orgId });

      const input = req.user!;
      checkUsername(input.username, "user.username");
      const custom = dataChange(input, input.type.case === "human", true);
      const userId = newId();
      let event: NewEvent;
      if (input.type.case === "human") {
        event = addHumanEvent(userId, orgId, await humanPayload(input.username, input.type.value));
      } else {
        const machine = input.type.value!;
        const problem = machineUsernameProblem(input.username);
        if (problem) throw new InvalidArgumentError(problem, "user.username");
        event = addMachineEvent(userId, orgId, {
          username: input.username,
          name: machine.name,
          description: given(machine.description),
          access_token_type: machine.accessTokenType,
        });
      }
      const [stored] = await deps.eventStore.push({ instanceId, creator: call.creator }, async (tx) => {
        await holdOrg(tx, instanceId, orgId);
        // the creator writes as an administrator of the organization (`owner` field permissions)
        const data = custom && (await decideUserData(tx, instanceId, NO_DATA, custom, "owner"));
        if (!data) return [event];
        const payload = {
          ...event.payload,
          schema_id: data.schemaId,
          schema_revision: data.revision,
          data: data.data,
        };
        return [{ ...event, payload }];
      });
      return {
        details: resourceDetails({
          id: userId,
          sequence: stored.sequence,
          changeDate: stored.createdAt,
          owner: { type: OwnerType.org, id: orgId },
        }),
      };
    },

    async getUser(req, ctx) {
      // the user itself may read itself (its custom data as the `self` field permissions allow)
      const { call, row } = await userCall(ctx, req.id, "user.read", { self: true });
      const instanceId = call.context.type === "system" ? "" : call.context.instanceId;
      const metadata = await readMetadata(deps.db, instanceId, [row.id]);
      const data = await visibleData(deps.db, instanceId, [row], () => roleOn(call.caller, row.id));
      return { user: toUser(row, metadata.get(row.id), data.get(row.id)) };
    },

    async patchUser(req, ctx) {
      // the user itself may change its custom data alone (as the `self` field permissions allow)
      const { call, row } = await userCall(ctx, req.id, "user.write", { self: onlyData(req.user) });
      const change = changeOf(req.user, row.type);
      const custom = req.user ? dataChange(req.user, row.type === UserType.human, false) : undefined;
      const role = roleOn(call.caller, req.id);
      const username = req.user?.username;
      if (username !== undefined) checkUsername(username, "user.username");
      const problem =
        username !== undefined && row.type === UserType.machine && machineUsernameProblem(username);
      if (problem) throw new InvalidArgumentError(problem, "user.username");
      const details = await onUser(call, req.id, async (user, tx) => {
        const events = [
          ...(username === undefined ? [] : changeUsernameEvent(user, username)),
          ...changeUserEvents(user, change),
        ];
        // an address changed without is_verified: true is unverified and gets a code to prove it
        const instanceId = call.context.type === "system" ? "" : call.context.instanceId;
        const data = custom && (await decideUserData(tx, instanceId, user.custom, custom, role));
        return [
          ...events,
          ...(await codes.codes.codesOnChange(tx, instanceId, user, events)),
          ...userDataEvents(user, data),
        ];
      });
      return { details };
    },

    async deleteUser(req, ctx) {
      const { call } = await userCall(ctx, req.id, "user.delete");
      const details = await onUser(call, req.id, async (user, tx) => {
        await lockUserForRemoval(tx, call.context.type === "system" ? "" : call.context.instanceId, user.id);
        const memberships = await tx.query<{
          id: string;
          context_type: number;
          context_id: string;
          org_id: string | null;
        }>(
          "SELECT id, context_type, context_id, org_id FROM memberships WHERE instance_id = $1 AND user_id = $2",
          [call.context.type === "system" ? "" : call.context.instanceId, user.id],
        );
        const grants = await userGrantsWhere(
          tx,
          call.context.type === "system" ? "" : call.context.instanceId,
          "user_id",
          [user.id],
        );
        return [
          removeUserEvent(user),
          ...grants.map((g) => cascadeRemoveUserGrant(g, "user_removed")),
          ...memberships.map((m) =>
            removeMembershipEvent(
              m.id,
              m.context_type === ContextType.instance ? m.context_id : (m.org_id ?? m.context_id),
              {
                context_type: m.context_type as ContextType,
                context_id: m.context_id,
                user_id: user.id,
              },
            ),
          ),
        ];
      });
      return { details };
    },

    lockUser: (req, ctx) => stateAction(ctx, req.id, "lock"),
    unlockUser: (req, ctx) => stateAction(ctx, req.id, "unlock"),
    deactivateUser: (req, ctx) => stateAction(ctx, req.id, "deactivate"),
    reactivateUser: (req, ctx) => stateAction(ctx, req.id, "reactivate"),

    async setPassword(req, ctx) {
      const { call, row } = await userCall(ctx, req.id, "user.credential.write", { self: true });
      if (row.type !== UserType.human)
        throw new FailedPreconditionError("passwords exist only for human users");
      const input = req.password!;
      checkPasswordPolicy(input.password, deps.config.passwordMinLength, "password.password");
      const isSelf = call.caller.kind === "user" && call.caller.userId === req.id;
      const code = input.verificationCode;
      if (code !== undefined && input.currentPassword !== undefined)
        throw new InvalidArgumentError("give either current_password or verification_code", "password");
      if (code === "") throw new InvalidArgumentError("must not be empty", "password.verification_code");
      if (code === undefined && (input.currentPassword !== undefined || (isSelf && row.password_set))) {
        if (!input.currentPassword)
          throw new InvalidArgumentError("is required", "password.current_password");
        const current = await deps.db.query<{ password_hash: string | null }>(
          "SELECT password_hash FROM users WHERE instance_id = $1 AND id = $2",
          [call.context.type === "system" ? "" : call.context.instanceId, req.id],
        );
        const hash = current[0]?.password_hash;
        if (!hash || !(await verifyPassword(hash, input.currentPassword)))
          throw new InvalidArgumentError("is not the current password", "password.current_password");
      }
      const passwordHash = await hashPassword(input.password);
      let refused: InvalidArgumentError | undefined;
      const instanceId = call.context.type === "system" ? "" : call.context.instanceId;
      // the change ends the user's sessions; the user's own keeps the session its token came from
      const keep = isSelf && call.caller.kind === "user" ? call.caller.sessionId : undefined;
      const details = await onUser(call, req.id, async (user, tx) => {
        refused = undefined;
        let events: NewEvent[];
        if (code === undefined) events = setPasswordEvents(user, passwordHash, input.changeRequired);
        else {
          // the code (RequestPasswordReset or InviteUser: either kind here) stands for the current password
          const decided = codes.codes.setPasswordWithCode(instanceId, user, code, passwordHash, {
            changeRequired: input.changeRequired,
          });
          // a wrong code: the wrong try is counted, nothing else changes
          if (!decided.ok) refused = decided.error;
          events = decided.events;
        }
        return [...events, ...(await endSessionsOnPasswordChange(tx, instanceId, events, keep))];
      });
      if (refused) throw refused;
      return { details };
    },

    async setUserMetadata(req, ctx) {
      const { call } = await userCall(ctx, req.id, "user.write");
      const entries: Record<string, string> = {};
      for (const [key, value] of Object.entries(req.metadata?.entries ?? {})) {
        if (key.length === 0 || [...key].length > 200)
          throw new InvalidArgumentError(
            `key "${key.slice(0, 50)}" must have 1 to 200 characters`,
            "metadata.entries",
          );
        entries[key] = Buffer.from(value).toString("base64");
      }
      return { details: await onUser(call, req.id, (user) => metadataEvents(user, entries)) };
    },
  });
}
