/**
 * Notification providers (docs/notifications.md): the SMTP servers e-mail is sent through (aggregate
 * `smtp_provider`) and the HTTP endpoints SMS are handed to (aggregate `sms_provider`); ID: a new ID,
 * resource owner: the instance. At most one provider of each kind is active in an instance. Events carry
 * the configuration without secrets: an SMTP provider's password and an SMS provider's signing key are
 * sealed with the master key in `notification_provider_secrets`, written by the commands, never in an
 * event (`password_changed` flags a new password).
 */
import type { StoredEvent } from "../../eventstore/types.ts";

export const SMTP_PROVIDER = "smtp_provider";
export const SMS_PROVIDER = "sms_provider";

export type ProviderKind = "smtp" | "sms";

/** The aggregate type of a kind. */
export const aggregateOf: Record<ProviderKind, string> = { smtp: SMTP_PROVIDER, sms: SMS_PROVIDER };

function eventsOf<A extends string>(aggregate: A) {
  return {
    /** The whole configuration (without secrets); a new provider is inactive. */
    added: `${aggregate}.added`,
    /** Only the fields that changed; `password_changed: true` when a new password was stored. */
    changed: `${aggregate}.changed`,
    /** Messages of its kind go through this provider from now on. */
    activated: `${aggregate}.activated`,
    /** Messages no longer go through it (`superseded_by`: the provider activated in its place). */
    deactivated: `${aggregate}.deactivated`,
    removed: `${aggregate}.removed`,
  } as const;
}

export const SmtpProviderEvent = eventsOf(SMTP_PROVIDER);
export const SmsProviderEvent = eventsOf(SMS_PROVIDER);
export const ProviderEvents = { smtp: SmtpProviderEvent, sms: SmsProviderEvent } as const;

/** ProviderState of the API. */
export const ProviderState = { active: 1, inactive: 2 } as const;
export type ProviderState = (typeof ProviderState)[keyof typeof ProviderState];

/** Payload of `smtp_provider.added` (the password is not in it). */
export interface SmtpConfig {
  description: string;
  sender_address: string;
  sender_name: string;
  /** Absent: no Reply-To. */
  reply_to_address?: string;
  /** `host:port`. */
  host: string;
  /** The connection must be encrypted (implicit TLS on port 465, else STARTTLS required). */
  tls: boolean;
  /** AUTH user; absent: no AUTH. */
  user?: string;
}

/** Payload of `smtp_provider.changed`: the fields that changed ("" removes an optional one) and a flag. */
export interface SmtpChangedPayload extends Partial<SmtpConfig> {
  /** A new password was stored (or the old one removed with the user); never the password itself. */
  password_changed?: true;
}

/** Payload of `sms_provider.added` (the signing key is not in it). */
export interface SmsConfig {
  description: string;
  /** How messages are handed over: POSTed as JSON to `endpoint`. */
  type: "http";
  endpoint: string;
}

export type ProviderConfig = SmtpConfig | SmsConfig;

/** Names of the sealed secrets of each kind. */
export const SECRET = { password: "password", signingKey: "signing_key" } as const;

/** Optional fields: an empty value in a change removes them. */
const OPTIONAL = ["reply_to_address", "user"];

/** A configuration with the fields of a `changed` payload applied (its flags left out). */
export function mergeConfig(config: ProviderConfig, changes: Record<string, unknown>): ProviderConfig {
  const { password_changed: _, ...fields } = changes;
  const merged: Record<string, unknown> = { ...config, ...fields };
  for (const key of OPTIONAL) if (merged[key] === "") delete merged[key];
  return merged as unknown as ProviderConfig;
}

export interface ProviderAggregate {
  config: ProviderConfig;
  state: ProviderState;
  sequence: number;
  changedAt: Date;
}

/** Current state of a provider from its events; undefined when it does not exist (never added or removed). */
export function foldProvider(kind: ProviderKind, events: StoredEvent[]): ProviderAggregate | undefined {
  const names = ProviderEvents[kind];
  let state: ProviderAggregate | undefined;
  for (const e of events) {
    const at = { sequence: e.sequence, changedAt: e.createdAt };
    switch (e.type) {
      case names.added:
        state = { config: e.payload as unknown as ProviderConfig, state: ProviderState.inactive, ...at };
        break;
      case names.changed:
        if (state) state = { ...state, config: mergeConfig(state.config, e.payload ?? {}), ...at };
        break;
      case names.activated:
        if (state) state = { ...state, state: ProviderState.active, ...at };
        break;
      case names.deactivated:
        if (state) state = { ...state, state: ProviderState.inactive, ...at };
        break;
      case names.removed:
        state = undefined;
        break;
    }
  }
  return state;
}
