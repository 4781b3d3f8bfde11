/**
 * The notification outbox's sending side: one worker per process takes due rows (./outbox.ts
 * `claimMessages`, `FOR UPDATE SKIP LOCKED`, so with several processes on one PostgreSQL each row is taken
 * by one of them at a time), renders each message (./messages) from the row and the read models as they
 * are now, sends it through the instance's active provider outside any transaction (./sender.ts), and
 * records the outcome: sent; pending again after a back-off with jitter (a transient failure: no answer, an
 * SMTP 4xx, an SMS endpoint's 5xx/408/429); failed at once on a permanent refusal, with no active provider
 * or when the user is gone, or once PLATFORM_NOTIFICATION_MAX_ATTEMPTS are used up.
 *
 * It wakes on this process's commits that queued messages, on a PostgreSQL notification from other
 * processes, when the next retry is due, and at the latest every POLL_MS. Rows a dead process leased
 * become due again when their lease runs out, so after a crash or restart nothing is lost; a message is
 * sent again only when the provider's acknowledgement was never recorded (a crash between the two).
 */
import { unseal } from "../crypto/masterkey.ts";
import { type LanguageChoice, languageSettings } from "../login/i18n.ts";
import type { Metrics } from "../metrics/metrics.ts";
import { activeProvider, type ProviderRow } from "../query/notification-providers.ts";
import { settingsLayers } from "../query/settings.ts";
import type { Queryable } from "../storage/database.ts";
import { MessageBrandings } from "./branding.ts";
import { MESSAGES, type MessageInput, type MessageType, renderMessage } from "./messages/index.ts";
import {
  type ClaimedMessage,
  claimMessages,
  codeContext,
  LEASE_MARGIN_SECONDS,
  MessageState,
  nextDue,
  type Outcome,
  purgeMessages,
  recordOutcomes,
  releaseMessage,
  retryDelayMs,
} from "./outbox.ts";
import { type NotificationSender, SEND_TIMEOUT_MS } from "./sender.ts";
import { SmsSendError } from "./sms.ts";
import { SmtpSendError, type SmtpSession } from "./smtp.ts";

/** Longest sleep when nothing is due (catches rows whose notification was missed). */
const POLL_MS = 5_000;
/** Sends in flight at once per process. */
const CONCURRENCY = 32;
/** With sends in flight, rows are taken only once this many slots are free (fewer, larger claims). */
const CLAIM_BATCH = 8;
const PURGE_EVERY_MS = 60 * 60 * 1000;
/** How long the language settings of an organization are used before they are read again. */
const LANGUAGES_TTL_MS = 5_000;
/** Connections a worker keeps open to one SMTP provider while it has messages for it. */
const SMTP_CONNECTIONS = 4;
/** An SMTP exchange has several phases, each bounded by the send timeout: the lease covers them all. */
const LEASE_SECONDS = (4 * SEND_TIMEOUT_MS) / 1000 + LEASE_MARGIN_SECONDS;

export interface MessageWorkerSettings {
  maxAttempts: number;
  retryDelayMs: number;
}

export interface MessageWorkerLog {
  error(object: Record<string, unknown>, message: string): void;
}

/** Thrown when an attempt failed; `permanent`: retrying cannot help. */
class SendFailure extends Error {
  constructor(
    message: string,
    readonly permanent: boolean,
  ) {
    super(message);
  }
}

export class MessageWorker {
  private stopped = false;
  private woken = false;
  private wakeUp?: () => void;
  private loop?: Promise<void>;
  private readonly inFlight = new Map<string, Promise<void>>();
  private nextPurge = Date.now() + 60_000;
  /** Outcomes waiting for the statement that records them (./outbox.ts `recordOutcomes`). */
  private outcomes: { row: ClaimedMessage; outcome: Outcome; done: (error?: unknown) => void }[] = [];
  private recording?: Promise<void>;
  /**
   * Open SMTP transports by instance and provider version, with the number of messages in flight through
   * each: messages sent one after the other reuse connections; the last one out closes the transport (and
   * drops the password unsealed for it).
   */
  private readonly sessions = new Map<string, { session: SmtpSession; users: number }>();
  private readonly languageCache = new Map<string, { value: LanguageChoice; until: number }>();
  /** The organizations' colours and logos of the e-mails. */
  private readonly brandings: MessageBrandings;

  constructor(
    private readonly db: Queryable,
    private readonly sender: NotificationSender,
    private readonly masterKey: Buffer,
    private readonly settings: MessageWorkerSettings,
    private readonly log: MessageWorkerLog,
    readonly processId: string,
    private readonly metrics?: Metrics,
  ) {
    this.brandings = new MessageBrandings(db);
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** The language and branding settings may have changed (a settings event, or changes this process missed). */
  forgetLanguages(): void {
    this.languageCache.clear();
    this.brandings.forget();
  }

  /** Something may be due now. */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /** Stops taking rows and waits for the loop and the sends in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake();
    await this.loop;
    await Promise.allSettled([...this.inFlight.values()]);
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      this.woken = false;
      let waitMs = POLL_MS;
      try {
        const free = CONCURRENCY - this.inFlight.size;
        if (free >= CLAIM_BATCH || (free > 0 && this.inFlight.size === 0)) {
          const rows = await claimMessages(this.db, free, this.processId, LEASE_SECONDS);
          const providers = await this.providersOf(rows);
          const languages = await this.languagesOf(rows);
          for (const row of rows) this.dispatch(row, providers, languages.get(languageKey(row)));
          if (rows.length === free) continue; // more may be due
          const due = await nextDue(this.db);
          if (due) waitMs = Math.max(0, Math.min(POLL_MS, due.getTime() - Date.now()));
        }
        if (Date.now() >= this.nextPurge) {
          this.nextPurge = Date.now() + PURGE_EVERY_MS;
          await purgeMessages(this.db);
        }
        failures = 0;
      } catch (error) {
        if (this.stopped) break;
        failures++;
        waitMs = Math.min(POLL_MS, 100 * 2 ** failures);
        this.log.error({ err: error }, "notification messages: cannot read the outbox");
      }
      if (this.stopped) break;
      if (!this.woken && waitMs > 0) await this.sleep(waitMs);
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      // a waiting worker never keeps the process alive
      const timer = setTimeout(done, ms).unref();
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wakeUp = () => {
        this.wakeUp = undefined;
        done();
      };
    });
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
          row.org_id ?? undefined,
        );
        cached = { value, until: Date.now() + LANGUAGES_TTL_MS };
        this.languageCache.set(key, cached);
      }
      languages.set(key, cached.value);
    }
    return languages;
  }

  /**
   * Records an outcome. One statement at a time: the outcomes that arrive while it runs are recorded
   * together by the next one (fewer commits, each of which the embedded database flushes to disk).
   */
  private record(row: ClaimedMessage, outcome: Outcome): Promise<void> {
    return new Promise((resolve, reject) => {
      this.outcomes.push({ row, outcome, done: (error) => (error ? reject(error) : resolve()) });
      this.recording ??= this.recordAll();
    });
  }

  private async recordAll(): Promise<void> {
    while (this.outcomes.length > 0) {
      const batch = this.outcomes.splice(0, 500);
      try {
        await recordOutcomes(this.db, batch, this.processId);
        for (const b of batch) b.done();
      } catch (error) {
        for (const b of batch) b.done(error);
      }
    }
    this.recording = undefined;
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

  private dispatch(
    row: ClaimedMessage,
    providers: Map<string, ProviderRow | undefined>,
    languages: LanguageChoice | undefined,
  ): void {
    const key = `${row.instance_id}\u0000${row.id}`;
    const provider = providers.get(`${row.instance_id}\u0000${kindOf(row)}`);
    const smtp = provider && kindOf(row) === "smtp" ? this.takeSession(row.instance_id, provider) : undefined;
    const sending = this.deliver(row, provider, smtp?.session, languages)
      .catch((error) => this.log.error({ err: error, message_id: row.id }, "notification message failed"))
      .finally(() => {
        smtp?.release();
        this.inFlight.delete(key);
        this.wake(); // a slot is free
      });
    this.inFlight.set(key, sending);
  }

  private async deliver(
    row: ClaimedMessage,
    provider: ProviderRow | undefined,
    smtp: SmtpSession | undefined,
    languages: LanguageChoice | undefined,
  ): Promise<void> {
    if (this.stopped) {
      await releaseMessage(this.db, row, this.processId);
      return;
    }
    let outcome: Outcome;
    try {
      await this.send(row, provider, smtp, languages);
      outcome = { state: MessageState.sent };
    } catch (error) {
      if (!(error instanceof SendFailure)) throw error;
      outcome =
        error.permanent || row.attempts >= this.settings.maxAttempts
          ? { state: MessageState.failed, error: error.message }
          : {
              state: MessageState.pending,
              error: error.message,
              retryInMs: retryDelayMs(row.attempts, this.settings.retryDelayMs),
            };
    }
    await this.record(row, outcome);
    this.metrics?.notifications.inc({
      result:
        outcome.state === MessageState.sent
          ? "sent"
          : outcome.state === MessageState.failed
            ? "failed"
            : "retry",
    });
  }

  /** The colours and logo of the recipient's organization (a failed read is a failed attempt). */
  private async brandingOf(row: ClaimedMessage) {
    try {
      return await this.brandings.of(row.instance_id, row.org_id ?? undefined, row.origin);
    } catch (error) {
      throw new SendFailure(`cannot read the branding settings: ${(error as Error).message}`, false);
    }
  }

  /** Renders and sends the message; throws a SendFailure when it was not sent. */
  private async send(
    row: ClaimedMessage,
    provider: ProviderRow | undefined,
    smtp: SmtpSession | undefined,
    languages: LanguageChoice | undefined,
  ): Promise<void> {
    const type = row.type as MessageType;
    const spec = Object.hasOwn(MESSAGES, type) ? MESSAGES[type] : undefined;
    const kind = kindOf(row);
    if (!spec || !kind) throw new SendFailure(`unknown message type ${row.type}`, true);
    if (row.username === null) throw new SendFailure(`user ${row.user_id} was removed`, true);
    if (!provider) throw new SendFailure(`no active ${kind === "smtp" ? "SMTP" : "SMS"} provider`, true);
    let code: { code: string; expiresIn: number } | Record<string, never> = {};
    if (spec.code) {
      if (row.sealed_code === null) throw new SendFailure("the code of the message is gone", true);
      code = {
        code: unseal(this.masterKey, row.sealed_code, codeContext(row.instance_id, row.id)),
        expiresIn: Number(row.code_expires_in ?? 0),
      };
    }
    const input = {
      // the recipient's language, else the default of the language settings, within the allowed ones
      language: {
        preferred: row.language,
        defaultLanguage: languages?.defaultLanguage ?? "en",
        allowed: languages?.allowed,
      },
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
        if (!smtp) throw new SendFailure("no SMTP transport", false);
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
          message_type: type.toLowerCase(),
          user_id: row.user_id,
          instance_id: row.instance_id,
        });
      }
    } catch (error) {
      throw classify(error);
    }
  }
}

const languageKey = (row: ClaimedMessage) => `${row.instance_id}\u0000${row.org_id ?? ""}`;

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
function classify(error: unknown): SendFailure {
  if (error instanceof SmtpSendError) {
    const status = /^([245])\d\d\b/.exec(error.response ?? "")?.[1];
    const text = error.response ? `the SMTP server answered: ${error.response}` : error.message;
    return new SendFailure(text, status === "5");
  }
  if (error instanceof SmsSendError) {
    const s = error.status;
    return new SendFailure(error.message, s !== undefined && s >= 400 && s < 500 && s !== 408 && s !== 429);
  }
  return new SendFailure(error instanceof Error ? error.message : String(error), false);
}
