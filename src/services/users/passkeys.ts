import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { OwnerType } from "../../domain/settings/events.ts";
import {
  type AuthenticatorAttachment,
  removePasskeyEvent,
  startPasskeyRegistration,
  verifyPasskeyRegistration,
} from "../../domain/user/factors/passkeys.ts";
import { InternalError } from "../../errors.ts";
import {
  PasskeyAuthenticator,
  PasskeySchema,
  PasskeyState,
  PasskeyType,
} from "../../gen/platform/resources/user/v3alpha/passkeys_pb.ts";
import type { PlatformUsers } from "../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import { newId } from "../../id.ts";
import { relyingPartyOf } from "../../query/relying-party.ts";
import { userFactors } from "../../query/user-factors.ts";
import type { AuthorizedCall } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { resourceDetails } from "../mapping.ts";
import { requireOwnFactorRemoval, requireOwnSignInChange } from "./own-sign-in-changes.ts";
import type { OnUser, UserCall } from "./user-calls.ts";

const attachments: Record<number, AuthenticatorAttachment> = {
  [PasskeyAuthenticator.UNSPECIFIED]: "unspecified",
  [PasskeyAuthenticator.PLATFORM]: "platform",
  [PasskeyAuthenticator.CROSS_PLATFORM]: "cross-platform",
};

/**
 * A user's passkeys and security keys (docs/factors.md "Passkeys and security keys"): CreatePasskey,
 * VerifyPasskey, ListPasskeys, RemovePasskey. Permission user.write (user.read to list), or the user itself;
 * the account-control rule of every account change applies (userCall). The decisions are
 * src/domain/user/factors/passkeys.ts's, which the login UI's pages share. A user adding a key to its own
 * account with a session's token needs a session that passed its second factor, and removing one a session
 * at least as strong as the key (./own-sign-in-changes.ts).
 */
export function passkeyRpcs(
  deps: ServiceDeps,
  userCall: UserCall,
  onUser: OnUser,
): Partial<ServiceImpl<typeof PlatformUsers>> {
  const instanceOf = (call: AuthorizedCall) => {
    if (call.context.type === "system") throw new InternalError("users belong to an instance");
    return call.context.instanceId;
  };

  return {
    async createPasskey(req, ctx) {
      const { call, row } = await userCall(ctx, req.id, "user.write", { self: true });
      const instanceId = instanceOf(call);
      await requireOwnSignInChange(deps, call, { id: req.id, orgId: row.org_id });
      const instance = await deps.instances.byId(instanceId);
      const rp = await relyingPartyOf(
        deps.db,
        deps.config,
        { instanceId, instanceName: instance?.name ?? "", host: call.scope.host },
        req.passkey?.domain,
        "passkey.domain",
      );
      const passkeyId = newId();
      let options: Record<string, unknown> = {};
      const details = await onUser(
        call,
        req.id,
        async (user, tx) => {
          const started = await startPasskeyRegistration(tx, instanceId, user, {
            passkeyId,
            type: req.passkey?.type === PasskeyType.U2F ? "u2f" : "passkey",
            authenticator: attachments[req.passkey?.authenticator ?? 0] ?? "unspecified",
            rp,
            now: new Date(),
          });
          options = started.options;
          return started.events;
        },
        passkeyId,
      );
      return { details, passkeyId, publicKeyCredentialCreationOptions: JSON.parse(JSON.stringify(options)) };
    },

    async verifyPasskey(req, ctx) {
      const { call, row } = await userCall(ctx, req.id, "user.write", { self: true });
      const instanceId = instanceOf(call);
      await requireOwnSignInChange(deps, call, { id: req.id, orgId: row.org_id });
      const details = await onUser(
        call,
        req.id,
        async (user, tx) => [
          await verifyPasskeyRegistration(tx, instanceId, user, {
            passkeyId: req.passkeyId,
            response: req.passkey?.publicKeyCredential,
            name: req.passkey?.name ?? "",
            now: new Date(),
          }),
        ],
        req.passkeyId,
      );
      return { details };
    },

    async listPasskeys(req, ctx) {
      const { call, row } = await userCall(ctx, req.id, "user.read", { self: true });
      const instanceId = instanceOf(call);
      const factors = await userFactors(deps.db, instanceId, row.id, { types: ["passkey", "u2f"] });
      return {
        passkeys: factors.map((f) =>
          create(PasskeySchema, {
            details: resourceDetails({
              id: f.id,
              sequence: Number(row.sequence),
              changeDate: f.changedAt,
              owner: { type: OwnerType.org, id: row.org_id },
            }),
            passkeyId: f.id,
            name: f.name,
            state: f.active ? PasskeyState.ACTIVE : PasskeyState.PENDING,
            type: f.type === "u2f" ? PasskeyType.U2F : PasskeyType.PASSKEY,
            creationDate: timestampFromDate(f.createdAt),
            lastUsedDate: f.lastUsedAt ? timestampFromDate(f.lastUsedAt) : undefined,
            synced: f.data.device_type === "multiDevice" || f.data.backed_up === true,
          }),
        ),
      };
    },

    async removePasskey(req, ctx) {
      const { call, row } = await userCall(ctx, req.id, "user.write", { self: true });
      const instanceId = instanceOf(call);
      const key = (
        await userFactors(deps.db, instanceId, req.id, { active: true, types: ["passkey", "u2f"] })
      ).find((f) => f.id === req.passkeyId);
      if (key) await requireOwnFactorRemoval(deps, call, { id: req.id, orgId: row.org_id }, key.type);
      const details = await onUser(call, req.id, async (user, tx) => [
        await removePasskeyEvent(tx, instanceId, user, req.passkeyId),
      ]);
      return { details };
    },
  };
}
