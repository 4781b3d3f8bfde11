/**
 * A machine user's credentials (docs/resources.md): GenerateMachineSecret (its client secret, shown once),
 * CreateMachineKey and RemoveMachineKey (JWT profile keys: a public key given, or a key pair made and its
 * private half returned once), CreatePersonalAccessToken and RemovePersonalAccessToken (shown once). Secrets
 * and tokens are stored as their SHA-256 only. Permission user.credential.write; the account-control rule
 * applies (./user-calls.ts).
 */
import type { ServiceImpl } from "@connectrpc/connect";
import { clientKeyPair, keyFile } from "../../crypto/keys.ts";
import { randomToken, sha256 } from "../../crypto/tokens.ts";
import { addPatEvent, requireMachine, userEvent } from "../../domain/user/commands.ts";
import { type KeyAddedPayload, UserEvent, UserType } from "../../domain/user/events.ts";
import { FailedPreconditionError, NotFoundError } from "../../errors.ts";
import type { PlatformUsers } from "../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import { newId } from "../../id.ts";
import type { ServiceDeps } from "../deps.ts";
import { expiration } from "../mapping.ts";
import type { OnUser, UserCall } from "./user-calls.ts";

export function machineCredentialRpcs(
  _deps: ServiceDeps,
  userCall: UserCall,
  onUser: OnUser,
): Partial<ServiceImpl<typeof PlatformUsers>> {
  return {
    async generateMachineSecret(req, ctx) {
      const { call } = await userCall(ctx, req.id, "user.credential.write");
      const secret = randomToken();
      let clientId = "";
      const details = await onUser(call, req.id, (user) => {
        requireMachine(user);
        clientId = user.username;
        return [userEvent(user, UserEvent.secretSet, { secret_hash: sha256(secret) })];
      });
      return { details, clientId, clientSecret: secret };
    },

    async createMachineKey(req, ctx) {
      const { call, row } = await userCall(ctx, req.id, "user.credential.write");
      if (row.type !== UserType.machine)
        throw new FailedPreconditionError("machine credentials exist only for machine users");
      const expires = expiration(req.key?.expirationDate, "key.expiration_date");
      const keyId = newId();
      const { publicKey, privateKey } = await clientKeyPair(req.key?.publicKey, "key.public_key");
      const keyContent = privateKey
        ? keyFile({ type: "serviceaccount", keyId, key: privateKey, userId: req.id })
        : new Uint8Array();
      const payload: KeyAddedPayload = { key_id: keyId, public_key: publicKey, expiration: expires };
      const details = await onUser(
        call,
        req.id,
        (user) => {
          requireMachine(user);
          return [userEvent(user, UserEvent.keyAdded, { ...payload })];
        },
        keyId,
      );
      return { details, keyId, keyContent };
    },

    async removeMachineKey(req, ctx) {
      const { call } = await userCall(ctx, req.id, "user.credential.write");
      const details = await onUser(
        call,
        req.id,
        (user) => {
          requireMachine(user);
          if (!user.keys.has(req.keyId)) throw new NotFoundError("key not found");
          return [userEvent(user, UserEvent.keyRemoved, { key_id: req.keyId })];
        },
        req.keyId,
      );
      return { details };
    },

    async createPersonalAccessToken(req, ctx) {
      const { call } = await userCall(ctx, req.id, "user.credential.write");
      const expires = expiration(req.pat?.expirationDate, "pat.expiration_date");
      const patId = newId();
      const token = randomToken();
      const details = await onUser(
        call,
        req.id,
        (user) => {
          requireMachine(user);
          return [
            addPatEvent(user.id, user.orgId, {
              pat_id: patId,
              token_hash: sha256(token),
              expiration: expires,
            }),
          ];
        },
        patId,
      );
      return { details, patId, token };
    },

    async removePersonalAccessToken(req, ctx) {
      const { call } = await userCall(ctx, req.id, "user.credential.write");
      const details = await onUser(
        call,
        req.id,
        (user) => {
          requireMachine(user);
          if (!user.pats.has(req.patId)) throw new NotFoundError("personal access token not found");
          return [userEvent(user, UserEvent.patRemoved, { pat_id: req.patId })];
        },
        req.patId,
      );
      return { details };
    },
  };
}
