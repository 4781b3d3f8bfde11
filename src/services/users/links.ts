/**
 * A user's links to external identities (docs/identity-providers.md): ListUserLinks (user.read) and RemoveUserLink
 * (user.write; the account-control rule applies, ./user-calls.ts).
 */
import type { ServiceImpl } from "@connectrpc/connect";
import { OwnerType } from "../../domain/settings/events.ts";
import { removeIdpLinkEvents } from "../../domain/user/idp-links.ts";
import type { PlatformUsers } from "../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import type { ServiceDeps } from "../deps.ts";
import { resourceDetails } from "../mapping.ts";
import type { OnUser, UserCall } from "./user-calls.ts";

export function linkRpcs(
  deps: ServiceDeps,
  userCall: UserCall,
  onUser: OnUser,
): Partial<ServiceImpl<typeof PlatformUsers>> {
  return {
    async listUserLinks(req, ctx) {
      const { call, row } = await userCall(ctx, req.id, "user.read");
      const instanceId = call.context.type === "system" ? "" : call.context.instanceId;
      const links = await deps.db.query<{
        idp_id: string;
        external_user_id: string;
        external_username: string;
        created_at: Date | string;
        sequence: string | number;
      }>(
        `SELECT idp_id, external_user_id, external_username, created_at, sequence FROM user_idp_links
         WHERE instance_id = $1 AND user_id = $2 ORDER BY created_at, idp_id`,
        [instanceId, row.id],
      );
      return {
        links: links.map((l) => ({
          details: resourceDetails({
            id: l.idp_id,
            sequence: Number(l.sequence),
            changeDate: new Date(l.created_at),
            owner: { type: OwnerType.org, id: row.org_id },
          }),
          idpId: l.idp_id,
          externalUserId: l.external_user_id,
          externalUsername: l.external_username,
        })),
      };
    },

    async removeUserLink(req, ctx) {
      const { call } = await userCall(ctx, req.id, "user.write");
      const details = await onUser(call, req.id, (user) => removeIdpLinkEvents(user, req.idpId));
      return { details };
    },
  };
}
