/**
 * Sends one e-mail or one SMS of an instance through its active provider: what delivery (the outbox
 * worker) calls. The secrets are unsealed here, at the moment of sending, and never kept.
 */
import { unseal } from "../crypto/masterkey.ts";
import { SECRET, type SmsConfig, type SmtpConfig } from "../domain/notification/events.ts";
import { FailedPreconditionError } from "../errors.ts";
import { HttpCaller } from "../net/http.ts";
import type { OutboundPolicy } from "../net/outbound.ts";
import { activeProvider, type ProviderRow, providerSecretContext } from "../query/notification-providers.ts";
import type { Queryable } from "../storage/database.ts";
import { type SmsMessage, sendSms } from "./sms.ts";
import { type EmailMessage, openSmtp, type SmtpSession, sendEmail } from "./smtp.ts";

/** Bound of each phase of a delivery (connect, greeting, inactivity; the whole HTTP call). */
export const SEND_TIMEOUT_MS = 10_000;
/** Largest answer body read from an SMS endpoint. */
const MAX_SMS_ANSWER_BYTES = 64 * 1024;

export interface NotificationSenderOptions {
  db: Queryable;
  masterKey: Buffer;
  outbound: OutboundPolicy;
  timeoutMs?: number;
  /** Certificates trusted besides the system's for SMTP TLS (tests). */
  smtpCa?: string[];
}

export class NotificationSender {
  private readonly caller: HttpCaller;
  private readonly timeoutMs: number;

  constructor(private readonly options: NotificationSenderOptions) {
    this.timeoutMs = options.timeoutMs ?? SEND_TIMEOUT_MS;
    // providers are configured by the instance's administrators: the instance level of the policy
    this.caller = new HttpCaller({
      guard: options.outbound.guard("instance"),
      maxResponseBytes: MAX_SMS_ANSWER_BYTES,
      userAgent: "Platform-Notification/1",
      keepAlive: false,
    });
  }

  /** The unsealed secret `name` of a provider row (undefined when it has none). */
  secretOf(instanceId: string, row: ProviderRow, name: string): string | undefined {
    const sealed = row.secrets?.[name];
    return sealed === undefined
      ? undefined
      : unseal(this.options.masterKey, sealed, providerSecretContext(instanceId, row.id, name));
  }

  /** One e-mail through the provider `row`; rejects with an SmtpSendError. */
  emailThrough(instanceId: string, row: ProviderRow, message: EmailMessage) {
    return sendEmail(row.config as SmtpConfig, this.secretOf(instanceId, row, SECRET.password), message, {
      guard: this.options.outbound.guard("instance"),
      timeoutMs: this.timeoutMs,
      ca: this.options.smtpCa,
    });
  }

  /**
   * A transport of the provider `row` keeping up to `connections` connections open for the messages
   * sent through it until it is closed; its password is unsealed now and dropped with it.
   */
  emailSession(instanceId: string, row: ProviderRow, connections: number): SmtpSession {
    return openSmtp(
      row.config as SmtpConfig,
      this.secretOf(instanceId, row, SECRET.password),
      { guard: this.options.outbound.guard("instance"), timeoutMs: this.timeoutMs, ca: this.options.smtpCa },
      connections,
    );
  }

  /** One SMS through the provider `row`; rejects with an SmsSendError. */
  smsThrough(row: ProviderRow, message: SmsMessage) {
    const key = this.secretOf(message.instance_id, row, SECRET.signingKey) ?? "";
    return sendSms(row.config as SmsConfig, key, message, this.caller, this.timeoutMs);
  }

  /** One e-mail through the instance's active SMTP provider (FAILED_PRECONDITION when none is active). */
  async sendEmail(instanceId: string, message: EmailMessage) {
    const row = await activeProvider(this.options.db, instanceId, "smtp");
    if (!row) throw new FailedPreconditionError("no SMTP provider is active");
    return this.emailThrough(instanceId, row, message);
  }

  /** One SMS through the instance's active SMS provider (FAILED_PRECONDITION when none is active). */
  async sendSms(message: SmsMessage) {
    const row = await activeProvider(this.options.db, message.instance_id, "sms");
    if (!row) throw new FailedPreconditionError("no SMS provider is active");
    return this.smsThrough(row, message);
  }
}
