import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { seal } from "../../crypto/masterkey.ts";
import { randomToken } from "../../crypto/tokens.ts";
import {
  activateProvider,
  addProvider,
  changeProvider,
  deactivateProvider,
  removeProvider,
} from "../../domain/notification/commands.ts";
import { SECRET, type SmsConfig } from "../../domain/notification/events.ts";
import { FailedPreconditionError } from "../../errors.ts";
import {
  ActivateSMSProviderResponseSchema,
  CreateSMSProviderResponseSchema,
  DeactivateSMSProviderResponseSchema,
  DeleteSMSProviderResponseSchema,
  GetSMSProviderResponseSchema,
  PatchSMSProviderResponseSchema,
  type PlatformNotifications,
  SearchSMSProvidersResponseSchema,
  TestSMSProviderResponseSchema,
} from "../../gen/platform/resources/notification/v3alpha/notification_service_pb.ts";
import {
  type GetSMSProvider,
  GetSMSProviderSchema,
  HTTPSMSProviderSchema,
  type ProviderState,
  SMSProviderSchema,
} from "../../gen/platform/resources/notification/v3alpha/provider_pb.ts";
import { newId } from "../../id.ts";
import { SmsSendError } from "../../notifications/sms.ts";
import {
  type ProviderRow,
  providerSecretContext,
  searchProviders,
} from "../../query/notification-providers.ts";
import { toPage } from "../../query/search.ts";
import { requireHttpUrl } from "../actions/mapping.ts";
import { answersSecrets } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails } from "../mapping.ts";
import { providerDetails, requireProvider, requireReachable, rowDetails, toFilters } from "./common.ts";
import type { Gate } from "./service.ts";

/** `provider.http.endpoint`: an http(s) URI whose host the outbound policy does not refuse outright. */
function endpointOf(deps: ServiceDeps, endpoint: string): string {
  const field = "provider.http.endpoint";
  requireHttpUrl(endpoint, field);
  requireReachable(deps.outbound.guard("instance"), new URL(endpoint).hostname, field);
  return endpoint;
}

/** CreateSMSProvider … TestSMSProvider. */
export function smsRpcs(deps: ServiceDeps, gate: Gate): Partial<ServiceImpl<typeof PlatformNotifications>> {
  /** A provider as answered; its signing key only `withKey` (src/services/call.ts `answersSecrets`). */
  const toGet = (row: ProviderRow, instanceId: string, withKey: boolean): GetSMSProvider => {
    const c = row.config as SmsConfig;
    return create(GetSMSProviderSchema, {
      details: rowDetails(row, instanceId),
      state: row.state as ProviderState,
      provider: create(SMSProviderSchema, {
        description: c.description,
        type: { case: "http", value: create(HTTPSMSProviderSchema, { endpoint: c.endpoint }) },
        signingKey: withKey ? (deps.notifications.secretOf(instanceId, row, SECRET.signingKey) ?? "") : "",
      }),
    });
  };
  return {
    async createSMSProvider(req, ctx) {
      const call = await gate(ctx, "iam.notification.write");
      const p = req.provider!; // required by the declared rules, as are description and the type
      const config: SmsConfig = {
        description: p.description,
        type: "http",
        endpoint: endpointOf(deps, p.type.value!.endpoint),
      };
      const id = newId();
      const signingKey = randomToken();
      const context = providerSecretContext(call.instanceId, id, SECRET.signingKey);
      const version = await addProvider(
        deps.eventStore,
        { instanceId: call.instanceId, creator: call.creator },
        "sms",
        id,
        config,
        [{ name: SECRET.signingKey, sealed: seal(deps.masterKey, signingKey, context) }],
      );
      return create(CreateSMSProviderResponseSchema, {
        details: providerDetails(version, call.instanceId),
        signingKey,
      });
    },

    async patchSMSProvider(req, ctx) {
      const call = await gate(ctx, "iam.notification.write");
      const p = req.provider!;
      const endpoint = p.type.case === "http" ? endpointOf(deps, p.type.value.endpoint) : undefined;
      const version = await changeProvider(
        deps.eventStore,
        { instanceId: call.instanceId, creator: call.creator },
        "sms",
        req.id,
        { fields: { description: p.description, endpoint } },
      );
      return create(PatchSMSProviderResponseSchema, { details: providerDetails(version, call.instanceId) });
    },

    async deleteSMSProvider(req, ctx) {
      const call = await gate(ctx, "iam.notification.delete");
      const version = await removeProvider(
        deps.eventStore,
        { instanceId: call.instanceId, creator: call.creator },
        "sms",
        req.id,
      );
      return create(DeleteSMSProviderResponseSchema, { details: providerDetails(version, call.instanceId) });
    },

    async getSMSProvider(req, ctx) {
      const call = await gate(ctx, "iam.notification.read");
      const row = await requireProvider(deps.db, call.instanceId, "sms", req.id);
      const withKey = await answersSecrets(deps, call, "iam.notification.read");
      return create(GetSMSProviderResponseSchema, { provider: toGet(row, call.instanceId, withKey) });
    },

    async searchSMSProviders(req, ctx) {
      const call = await gate(ctx, "iam.notification.read");
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const result = await searchProviders(
        deps.db,
        call.instanceId,
        "sms",
        toFilters(req.filters),
        req.sortingColumn,
        page,
      );
      const withKey = await answersSecrets(deps, call, "iam.notification.read");
      return create(SearchSMSProvidersResponseSchema, {
        details: listDetails(result),
        sortingColumn: req.sortingColumn,
        result: result.rows.map((row) => toGet(row, call.instanceId, withKey)),
      });
    },

    async activateSMSProvider(req, ctx) {
      const call = await gate(ctx, "iam.notification.write");
      const version = await activateProvider(
        deps.eventStore,
        { instanceId: call.instanceId, creator: call.creator },
        "sms",
        req.id,
      );
      return create(ActivateSMSProviderResponseSchema, {
        details: providerDetails(version, call.instanceId),
      });
    },

    async deactivateSMSProvider(req, ctx) {
      const call = await gate(ctx, "iam.notification.write");
      const version = await deactivateProvider(
        deps.eventStore,
        { instanceId: call.instanceId, creator: call.creator },
        "sms",
        req.id,
      );
      return create(DeactivateSMSProviderResponseSchema, {
        details: providerDetails(version, call.instanceId),
      });
    },

    async testSMSProvider(req, ctx) {
      const call = await gate(ctx, "iam.notification.write");
      const row = await requireProvider(deps.db, call.instanceId, "sms", req.id);
      try {
        await deps.notifications.smsThrough(row, {
          recipient: req.receiverNumber,
          text: `This is a test message of the SMS provider "${row.description}".`,
          message_type: "TEST",
          user_id: "",
          instance_id: call.instanceId,
        });
      } catch (error) {
        if (!(error instanceof SmsSendError)) throw error;
        throw new FailedPreconditionError(`the message could not be sent: ${error.message}`);
      }
      return create(TestSMSProviderResponseSchema, {});
    },
  };
}
