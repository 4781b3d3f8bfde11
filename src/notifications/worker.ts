/**
 * The notification outbox's sending side: the worker of `notification_messages` (./outbox.ts), one of the
 * durable outboxes of ../outbox (../outbox/worker.ts, one per process). It renders each message
 * (./messages) from the row and the read models as they are now, sends it through the instance's active
 * provider (./sender.ts): sent; pending again after a back-off with jitter on a transient failure (no
 * answer, an SMTP 4xx, an SMS endpoint's 5xx/408/429); failed at once on a permanent refusal, with no
 * active provider or when the user is gone, or once PLATFORM_NOTIFICATION_MAX_ATTEMPTS are used up. A
 * message is sent again only when the provider's acknowledgement was never recorded (a crash between the
 * two). A process that stops lets the sends in flight finish.
 */
import { unseal } from "../crypto/masterkey.ts";
import { type LanguageChoice, languageSettings } from "../login/i18n.ts";
import type { Metrics } from "../metrics/metrics.ts";
import { LEASE_MARGIN_SECONDS, type Outcome, RowState } from "../outbox/table.ts";
import { AttemptFailure, type OutboxLog, OutboxWorker, type RetrySettings } from "../outbox/worker.ts";
import { activeProvider, type ProviderRow } from "../query/notification-providers.ts";
import { settingsLayers } from "../query/settings.ts";
import type { Queryable } from "../storage/database.ts";
import { MessageTextCache } from "../texts/overrides.ts";
import { MessageBrandings } from "./branding.ts";
import {
  MESSAGES,
  type MessageInput,
  type MessageType,
  messageLanguage,
  renderMessage,
} from "./messages/index.ts";
import { type ClaimedMessage, claimMessages, codeContext, MESSAGES_TABLE } from "./outbox.ts";
import { type NotificationSender, SEND_TIMEOUT_MS } from "./sender.ts";
import { SmsSendError } from "./sms.ts";
import { SmtpSendError, type SmtpSession } from "./smtp.ts";

/** Sends in flight at once per process. */
const CONCURRENCY = 32;
/** How long the language settings of an organization are used before they are read again. */
const LANGUAGES_TTL_MS = 5_000;
/** Connections a worker keeps open to one SMTP provider while it has messages for it. */
const SMTP_CONNECTIONS = 4;
/** An SMTP exchange has several phases, each bounded by the send timeout: the lease covers them all. */
const LEASE_SECONDS = (4 * SEND_TIMEOUT_MS) / 1000 + LEASE_MARGIN_SECONDS;

export type MessageWorkerSettings = RetrySettings;
export type MessageWorkerLog = OutboxLog;

/** A claimed row with the provider and language settings it is sent with, looked up once per claim. */
interface MessageJob extends ClaimedMessage {
  provider?: ProviderRow;
  languages?: LanguageChoice;
}

export class MessageWorker extends OutboxWorker<MessageJob> {
  /**
   * Open SMTP transports by instance and provider version, with the number of messages in flight through
   * each: messages sent one after the other reuse connections; the last one out closes the transport (and
   * drops the password unsealed for it).
   */
  private readonly sessions = new Map<string, { session: SmtpSession; users: number }>();
  private readonly languageCache = new Map<string, { value: LanguageChoice; until: number }>();
  /** Administrators' texts of the messages, per organization and language (src/texts). */
  private readonly texts = new MessageTextCache(
    (category, context) => settingsLayers(this.db, category, context),
    LANGUAGES_TTL_MS,
  );
  /** The organizations' colours and logos of the e-mails. */
  private readonly brandings: MessageBrandings;

  constructor(
    db: Queryable,
    private readonly sender: NotificationSender,
    private readonly masterKey: Buffer,
    settings: MessageWorkerSettings,
    log: MessageWorkerLog,
    processId: string,
    private readonly metrics?: Metrics,
  ) {
    super({
      table: MESSAGES_TABLE,
      db,
      processId,
      concurrency: CONCURRENCY,
      retry: settings,
      log,
      names: { outbox: "notification messages", item: "notification message", idField: "message_id" },
    });
    this.brandings = new MessageBrandings(db);
  }

  /** The language, text and branding settings may have changed (a settings event, or changes this process missed). */
  forgetLanguages(): void {
    this.languageCache.clear();
    this.texts.forget();
    this.brandings.forget();
  }

  protected async claim(limit: number): Promise<MessageJob[]> {
    const rows: MessageJob[] = await claimMessages(this.db, limit, this.processId, LEASE_SECONDS);
    const providers = await this.providersOf(rows);
    const languages = await this.languagesOf(rows);
    for (const row of rows) {
      row.provider = providers.get(`${row.instance_id}\u0000${kindOf(row)}`);
      row.languages = languages.get(languageKey(row));
    }
    return rows;
  }

  protected override recorded(_row: MessageJob, outcome: Outcome): void {
    const result = { [RowState.done]: "sent", [RowState.pending]: "retry", [RowState.failed]: "failed" };
    this.metrics?.notifications.inc({ result: result[outcome.state] });
  }

  /**
   * The active provider of each instance and kind among `rows`, looked up once per claim: the provider a
   * row is sent through is the one active when it was taken.
   */
  private async providersOf(rows: ClaimedMessage[]): Promise<Map<string, ProviderRow | undefined>> {
    const providers = new Map<string, ProviderRow | undefined>();
    for (const row of rows) {
      const kind = kindOf(row);
      const key = `${row.instance_id}\u0000${kind}`;
      if (kind && !providers.has(key))
        providers.set(key, await activeProvider(this.db, row.instance_id, kind));
    }
    return providers;
  }

  /**
   * The language settings of each organization among `rows` (its own, else the instance's), read at most
   * every LANGUAGES_TTL_MS per organization, and again after any settings event (`forgetLanguages`).
   */
  private async languagesOf(rows: ClaimedMessage[]): Promise<Map<string, LanguageChoice>> {
    const languages = new Map<string, LanguageChoice>();
    for (const row of rows) {
      const key = languageKey(row);
      if (languages.has(key)) continue;
      let cached = this.languageCache.get(key);
      if (!cached || cached.until < Date.now()) {
        if (this.languageCache.size > 10_000) this.languageCache.clear();
        const value = await languageSettings(
          (category, context) => settingsLayers(this.db, category, context),
          row.instance_id,
          row.label_org_id ?? undefined,
        );
        cached = { value, until: Date.now() + LANGUAGES_TTL_MS };
        this.languageCache.set(key, cached);
      }
      languages.set(key, cached.value);
    }
    return languages;
  }

  /** The shared transport of an SMTP provider, taken for one message (`release` gives it back). */
  private takeSession(instanceId: string, provider: ProviderRow): { session: SmtpSession; release(): void } {
    const key = `${instanceId}\u0000${provider.id}\u0000${provider.sequence}`;
    let entry = this.sessions.get(key);
    if (!entry) {
      entry = { session: this.sender.emailSession(instanceId, provider, SMTP_CONNECTIONS), users: 0 };
      this.sessions.set(key, entry);
    }
    const taken = entry;
    taken.users++;
    return {
      session: taken.session,
      release: () => {
        if (--taken.users > 0) return;
        this.sessions.delete(key);
        taken.session.close();
      },
    };
  }

  protected async send(row: MessageJob): Promise<undefined> {
    const { provider } = row;
    const smtp = provider && kindOf(row) === "smtp" ? this.takeSession(row.instance_id, provider) : undefined;
    try {
      await this.sendMessage(row, smtp?.session);
    } finally {
      smtp?.release();
    }
    return undefined;
  }

  /**
   * The colours and logo of the message's organization (`label_org_id`: the recipient's, or the one a
   * sign-in's project enforces); a failed read is a failed attempt.
   */
  private async brandingOf(row: ClaimedMessage) {
    try {
      return await this.brandings.of(row.instance_id, row.label_org_id ?? undefined, row.origin);
    } catch (error) {
      throw new AttemptFailure(`cannot read the branding settings: ${(error as Error).message}`, false);
    }
  }

  /** Renders and sends the message; throws an AttemptFailure when it was not sent. */
  private async sendMessage(row: MessageJob, smtp: SmtpSession | undefined): Promise<void> {
    const { provider, languages } = row;
    const type = row.type as MessageType;
    const spec = Object.hasOwn(MESSAGES, type) ? MESSAGES[type] : undefined;
    const kind = kindOf(row);
    if (!spec || !kind) throw new AttemptFailure(`unknown message type ${row.type}`, true);
    if (row.username === null) throw new AttemptFailure(`user ${row.user_id} was removed`, true);
    if (!provider) throw new AttemptFailure(`no active ${kind === "smtp" ? "SMTP" : "SMS"} provider`, true);
    let code: { code: string; expiresIn: number } | Record<string, never> = {};
    if (spec.code) {
      if (row.sealed_code === null) throw new AttemptFailure("the code of the message is gone", true);
      code = {
        code: unseal(this.masterKey, row.sealed_code, codeContext(row.instance_id, row.id)),
        expiresIn: Number(row.code_expires_in ?? 0),
      };
    }
    // the recipient's language, else the default of the language settings, within the allowed ones
    const language = {
      preferred: row.language,
      defaultLanguage: languages?.defaultLanguage ?? "en",
      allowed: languages?.allowed,
    };
    // the texts of the message's organization (the user's, or the one a sign-in's project enforces), else
    // the instance's, in the message's language
    let texts: Awaited<ReturnType<MessageTextCache["lookup"]>>;
    try {
      texts = await this.texts.lookup(
        row.instance_id,
        row.label_org_id ?? undefined,
        messageLanguage(language),
      );
    } catch (error) {
      throw new AttemptFailure(`cannot read the texts: ${(error as Error).message}`, false);
    }
    const input = {
      language,
      texts,
      origin: row.origin,
      recipient: {
        userId: row.user_id,
        displayName: row.display_name ?? undefined,
        firstName: row.given_name ?? "",
        lastName: row.family_name ?? "",
        loginName: row.username,
      },
      orgName: row.org_name ?? "",
      instanceName: row.instance_name ?? "",
      branding: kind === "smtp" ? await this.brandingOf(row) : undefined,
      ...code,
    } as MessageInput<typeof type>;
    const rendered = renderMessage(type, input);
    try {
      if (rendered.channel === "EMAIL") {
        if (!smtp) throw new AttemptFailure("no SMTP transport", false);
        await smtp.send({
          to: row.recipient,
          subject: rendered.subject,
          text: rendered.text,
          html: rendered.html,
        });
      } else {
        await this.sender.smsThrough(provider, {
          recipient: row.recipient,
          text: rendered.text,
          message_type: type, // the name the notifications API shows (VERIFY_PHONE, OTP_SMS)
          user_id: row.user_id,
          instance_id: row.instance_id,
        });
      }
    } catch (error) {
      throw classify(error);
    }
  }
}

const languageKey = (row: ClaimedMessage) => `${row.instance_id}\u0000${row.label_org_id ?? ""}`;

/** The provider kind a row is sent through (undefined: a type this version does not know). */
function kindOf(row: ClaimedMessage): "smtp" | "sms" | undefined {
  const spec = Object.hasOwn(MESSAGES, row.type) ? MESSAGES[row.type as MessageType] : undefined;
  return spec ? (spec.channel === "EMAIL" ? "smtp" : "sms") : undefined;
}

/**
 * Whether a failed send may succeed later: an SMTP answer 5xx is a refusal for good (4xx asks to try
 * again); an SMS endpoint's 4xx is, except 408 and 429; no answer at all (refused connection, timeout) is
 * transient.
 */
function classify(error: unknown): AttemptFailure {
  if (error instanceof SmtpSendError) {
    const status = /^([245])\d\d\b/.exec(error.response ?? "")?.[1];
    const text = error.response ? `the SMTP server answered: ${error.response}` : error.message;
    return new AttemptFailure(text, status === "5");
  }
  if (error instanceof SmsSendError) {
    const s = error.status;
    return new AttemptFailure(
      error.message,
      s !== undefined && s >= 400 && s < 500 && s !== 408 && s !== 429,
    );
  }
  return new AttemptFailure(error instanceof Error ? error.message : String(error), false);
}
