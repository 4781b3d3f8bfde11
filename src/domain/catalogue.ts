/**
 * The event catalogue: every aggregate type and event type Platform writes into an instance. The audit log
 * lists them (and accepts only them as filters), and docs/actions.md documents them for event executions.
 * System events (`system.*`, outside every instance) are not part of it.
 */
import { EXECUTION, ExecutionEvent, TARGET, TargetEvent } from "./action/events.ts";
import { IDP, IdpEvent } from "./idp/events.ts";
import { INSTANCE, InstanceEvent } from "./instance/events.ts";
import { MEMBERSHIP, MembershipEvent } from "./membership/events.ts";
import { SMS_PROVIDER, SMTP_PROVIDER, SmsProviderEvent, SmtpProviderEvent } from "./notification/events.ts";
import { ORG, OrgEvent } from "./org/events.ts";
import { PROJECT, ProjectEvent } from "./project/events.ts";
import { SESSION, SessionEvent } from "./session/events.ts";
import { SETTINGS, SettingsEvent } from "./settings/events.ts";
import { USER, UserEvent } from "./user/events.ts";
import { USER_SCHEMA, UserSchemaEvent } from "./user-schema/events.ts";
import { USER_GRANT, UserGrantEvent } from "./usergrant/events.ts";
import { WEB_KEY, WebKeyEvent } from "./web-key/events.ts";

/** Aggregate type → its event types (each `<aggregate type>.<what happened>`). */
export const eventCatalogue: ReadonlyMap<string, readonly string[]> = new Map(
  (
    [
      [USER, UserEvent],
      [ORG, OrgEvent],
      [INSTANCE, InstanceEvent],
      [MEMBERSHIP, MembershipEvent],
      [PROJECT, ProjectEvent],
      [USER_GRANT, UserGrantEvent],
      [SESSION, SessionEvent],
      [SETTINGS, SettingsEvent],
      [IDP, IdpEvent],
      [TARGET, TargetEvent],
      [EXECUTION, ExecutionEvent],
      [WEB_KEY, WebKeyEvent],
      [SMTP_PROVIDER, SmtpProviderEvent],
      [SMS_PROVIDER, SmsProviderEvent],
      [USER_SCHEMA, UserSchemaEvent],
    ] as const
  ).map(([aggregate, events]) => [aggregate, Object.values(events) as string[]]),
);

/** Every aggregate type of an instance, sorted. */
export const aggregateTypes: readonly string[] = [...eventCatalogue.keys()].sort();

/** Every event type of an instance, sorted. */
export const eventTypes: readonly string[] = [...eventCatalogue.values()].flat().sort();
