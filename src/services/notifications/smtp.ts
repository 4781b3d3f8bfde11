import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { seal, unseal } from "../../crypto/masterkey.ts";
import {
  activateProvider,
  addProvider,
  changeProvider,
  deactivateProvider,
  removeProvider,
  type SecretInput,
} from "../../domain/notification/commands.ts";
import { SECRET, type SmtpConfig } from "../../domain/notification/events.ts";
import { FailedPreconditionError, InvalidArgumentError } from "../../errors.ts";
import {
  ActivateSMTPProviderResponseSchema,
  CreateSMTPProviderResponseSchema,
  DeactivateSMTPProviderResponseSchema,
  DeleteSMTPProviderResponseSchema,
  GetSMTPProviderResponseSchema,
  PatchSMTPProviderResponseSchema,
  type PlatformNotifications,
  SearchSMTPProvidersResponseSchema,
  TestSMTPProviderResponseSchema,
} from "../../gen/platform/resources/notification/v3alpha/notification_service_pb.ts";
import {
  type GetSMTPProvider,
  GetSMTPProviderSchema,
  type ProviderState,
  SMTPProviderSchema,
} from "../../gen/platform/resources/notification/v3alpha/provider_pb.ts";
import { newId } from "../../id.ts";
import { parseHostPort, SmtpSendError } from "../../notifications/smtp.ts";
import {
  type ProviderRow,
  providerSecretContext,
  searchProviders,
} from "../../query/notification-providers.ts";
import { toPage } from "../../query/search.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails } from "../mapping.ts";
import { providerDetails, requireProvider, requireReachable, rowDetails, toFilters } from "./common.ts";
import type { Gate } from "./service.ts";

/** The pattern of e-mail addresses of the API (as `HumanEmail.address`). */
const EMAIL = /^[\w.!#$%&'*+/=?^{|}~-]+@[\w.-]+$/;

/** A patch's `reply_to_address`: an e-mail address, or empty (removes it). */
function replyToOf(value: string | undefined): string | undefined {
  if (value && !EMAIL.test(value))
    throw new InvalidArgumentError(`must match ${EMAIL.source}`, "provider.reply_to_address");
  return value;
}

/** `provider.host`: `host:port`, not a host the outbound policy refuses outright. */
function hostOf(deps: ServiceDeps, host: string): string {
  const parsed = parseHostPort(host);
  if (!parsed)
    throw new InvalidArgumentError("must be host:port with a port from 1 to 65535", "provider.host");
  requireReachable(deps.outbound.guard("instance"), parsed.host, "provider.host");
  return host;
}

function toGetSmtpProvider(row: ProviderRow, instanceId: string): GetSMTPProvider {
  const c = row.config as SmtpConfig;
  return create(GetSMTPProviderSchema, {
    details: rowDetails(row, instanceId),
    state: row.state as ProviderState,
    provider: create(SMTPProviderSchema, {
      description: c.description,
      senderAddress: c.sender_address,
      senderName: c.sender_name,
      replyToAddress: c.reply_to_address,
      host: c.host,
      tls: c.tls,
      user: c.user,
    }),
  });
}

/** CreateSMTPProvider … TestSMTPProvider. */
export function smtpRpcs(deps: ServiceDeps, gate: Gate): Partial<ServiceImpl<typeof PlatformNotifications>> {
  const sealed = (instanceId: string, id: string, password: string): SecretInput => {
    const context = providerSecretContext(instanceId, id, SECRET.password);
    return {
      name: SECRET.password,
      sealed: seal(deps.masterKey, password, context),
      isCurrent: (stored) => unseal(deps.masterKey, stored, context) === password,
    };
  };
  return {
    async createSMTPProvider(req, ctx) {
      const call = await gate(ctx, "iam.notification.write");
      const p = req.provider!; // required by the declared rules, as are description, sender and host
      const config: SmtpConfig = {
        description: p.description,
        sender_address: p.senderAddress,
        sender_name: p.senderName,
        ...(p.replyToAddress ? { reply_to_address: p.replyToAddress } : {}),
        host: hostOf(deps, p.host),
        tls: p.tls,
        ...(p.user ? { user: p.user } : {}),
      };
      const id = newId();
      const version = await addProvider(
        deps.eventStore,
        { instanceId: call.instanceId, creator: call.creator },
        "smtp",
        id,
        config,
        p.password ? [sealed(call.instanceId, id, p.password)] : [],
      );
      return create(CreateSMTPProviderResponseSchema, { details: providerDetails(version, call.instanceId) });
    },

    async patchSMTPProvider(req, ctx) {
      const call = await gate(ctx, "iam.notification.write");
      const p = req.provider!;
      const version = await changeProvider(
        deps.eventStore,
        { instanceId: call.instanceId, creator: call.creator },
        "smtp",
        req.id,
        {
          fields: {
            description: p.description,
            sender_address: p.senderAddress,
            sender_name: p.senderName,
            reply_to_address: replyToOf(p.replyToAddress),
            host: p.host === undefined ? undefined : hostOf(deps, p.host),
            tls: p.tls,
            user: p.user,
          },
          secret: p.password === undefined ? undefined : sealed(call.instanceId, req.id, p.password),
        },
      );
      return create(PatchSMTPProviderResponseSchema, { details: providerDetails(version, call.instanceId) });
    },

    async deleteSMTPProvider(req, ctx) {
      const call = await gate(ctx, "iam.notification.delete");
      const version = await removeProvider(
        deps.eventStore,
        { instanceId: call.instanceId, creator: call.creator },
        "smtp",
        req.id,
      );
      return create(DeleteSMTPProviderResponseSchema, { details: providerDetails(version, call.instanceId) });
    },

    async getSMTPProvider(req, ctx) {
      const call = await gate(ctx, "iam.notification.read");
      const row = await requireProvider(deps.db, call.instanceId, "smtp", req.id);
      return create(GetSMTPProviderResponseSchema, { provider: toGetSmtpProvider(row, call.instanceId) });
    },

    async searchSMTPProviders(req, ctx) {
      const call = await gate(ctx, "iam.notification.read");
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const result = await searchProviders(
        deps.db,
        call.instanceId,
        "smtp",
        toFilters(req.filters),
        req.sortingColumn,
        page,
      );
      return create(SearchSMTPProvidersResponseSchema, {
        details: listDetails(result),
        sortingColumn: req.sortingColumn,
        result: result.rows.map((row) => toGetSmtpProvider(row, call.instanceId)),
      });
    },

    async activateSMTPProvider(req, ctx) {
      const call = await gate(ctx, "iam.notification.write");
      const version = await activateProvider(
        deps.eventStore,
        { instanceId: call.instanceId, creator: call.creator },
        "smtp",
        req.id,
      );
      return create(ActivateSMTPProviderResponseSchema, {
        details: providerDetails(version, call.instanceId),
      });
    },

    async deactivateSMTPProvider(req, ctx) {
      const call = await gate(ctx, "iam.notification.write");
      const version = await deactivateProvider(
        deps.eventStore,
        { instanceId: call.instanceId, creator: call.creator },
        "smtp",
        req.id,
      );
      return create(DeactivateSMTPProviderResponseSchema, {
        details: providerDetails(version, call.instanceId),
      });
    },

    async testSMTPProvider(req, ctx) {
      const call = await gate(ctx, "iam.notification.write");
      const row = await requireProvider(deps.db, call.instanceId, "smtp", req.id);
      try {
        await deps.notifications.emailThrough(call.instanceId, row, {
          to: req.receiverAddress,
          subject: "Test message",
          text: `This is a test message of the SMTP provider "${row.description}" (${row.id}).`,
        });
      } catch (error) {
        if (!(error instanceof SmtpSendError)) throw error;
        throw new FailedPreconditionError(
          error.response
            ? `the SMTP server answered${error.code === "ETLS" ? " STARTTLS (required by tls: true)" : ""}: ${error.response}`
            : `the message could not be sent: ${error.message}`,
        );
      }
      return create(TestSMTPProviderResponseSchema, {});
    },
  };
}
