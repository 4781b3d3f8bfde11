/**
 * `renderMessage`: one notification message, ready for its sender, in the recipient's language. An e-mail
 * is a subject, an HTML part and a plain-text part; an SMS is a text. What each type needs is explicit in
 * its input type: who it is for, where from, and for the code-bearing types the code and its lifetime.
 *
 * The texts come from the built-in catalogue (./locales) unless `texts` overrides them (the text settings
 * that administrators edit); `branding` gives the organization's colours and logo. Links are built here
 * from the instance's origin (./links.ts): callers cannot point a message elsewhere.
 */
import { type Branding, type EmailContent, emailHtml, emailText } from "./layout.ts";
import { checkedOrigin, inviteUrl, passwordResetUrl, signInUrl, verifyEmailUrl } from "./links.ts";
import {
  formatExpiry,
  formatText,
  type LanguageChoice,
  messageLanguage,
  type PlaceholderValues,
  type TextLookup,
} from "./texts.ts";
import {
  type CodeMessageType,
  type EmailPart,
  keyOf,
  LINK_HINT_KEY,
  MESSAGES,
  type MessageSpec,
  type MessageType,
  type SmsMessageType,
} from "./types.ts";

export interface Recipient {
  userId: string;
  /** Empty or absent: "FirstName LastName", else the login name. */
  displayName?: string;
  firstName: string;
  lastName: string;
  /** The name the recipient signs in with. */
  loginName: string;
}

interface CommonInput {
  /** The recipient's preferred language, and the instance's default for when there are no texts in it. */
  language: LanguageChoice;
  /** The instance's origin (`https://id.example.com`): every link goes there. */
  origin: string;
  recipient: Recipient;
  orgName: string;
  instanceName: string;
  /** The organization's colours and logo (e-mail only); the defaults when absent. */
  branding?: Branding;
  /** Administrators' texts by language and key (./texts.ts); the catalogue's when it gives none. */
  texts?: TextLookup;
}

interface CodeInput {
  /** The one-time code. */
  code: string;
  /** How long the code stays valid, in seconds (the `Expiry` placeholder, in words). */
  expiresIn: number;
}

export type MessageInput<T extends MessageType> = CommonInput &
  (T extends CodeMessageType ? CodeInput : { code?: undefined; expiresIn?: undefined });

export interface RenderedEmail {
  channel: "EMAIL";
  language: string;
  /** One line (no line breaks: it goes into a header). */
  subject: string;
  html: string;
  /** Lines end with "\n"; the sender converts them for its protocol. */
  text: string;
}

export interface RenderedSms {
  channel: "SMS";
  language: string;
  text: string;
}

export type RenderedMessage<T extends MessageType> = T extends SmsMessageType ? RenderedSms : RenderedEmail;

/** The link of a type with one: where its page is, with the code when it carries one. */
function linkOf(
  type: MessageType,
  origin: string,
  userId: string,
  code: string | undefined,
): string | undefined {
  switch (type) {
    case "INIT":
      return inviteUrl(origin, userId, code ?? "");
    case "VERIFY_EMAIL":
      return verifyEmailUrl(origin, userId, code ?? "");
    case "PASSWORD_RESET":
      return passwordResetUrl(origin, userId, code ?? "");
    case "PASSWORD_CHANGED":
    case "EMAIL_CHANGED":
      return signInUrl(origin);
    default:
      return undefined;
  }
}

/**
 * An SMS in the GSM 7-bit alphabet where a look-alike exists: one character outside it (a typographic
 * apostrophe, the no-break space French number formats put before a unit) sends the whole message as
 * UCS-2, 70 characters per part instead of 160.
 */
export function gsmLookalikes(text: string): string {
  return text
    .replace(/[\u00a0\u2000-\u200a\u202f\u205f]/g, " ")
    .replace(/[\u2018\u2019\u201a\u2032]/g, "'")
    .replace(/[\u201c\u201d\u201e\u2033]/g, '"')
    .replace(/[\u2010-\u2015]/g, "-")
    .replace(/\u2026/g, "...");
}

/** Line breaks and runs of white space as one space: for the subject and the other one-line parts. */
const oneLine = (text: string) => text.replace(/\s+/g, " ").trim();

export function renderMessage<T extends MessageType>(type: T, input: MessageInput<T>): RenderedMessage<T> {
  const spec: MessageSpec | undefined = Object.hasOwn(MESSAGES, type) ? MESSAGES[type] : undefined;
  if (!spec) throw new Error(`messages: unknown message type "${type}"`);
  const { recipient } = input;
  const language = messageLanguage(input.language);
  const origin = checkedOrigin(input.origin);
  if (spec.code && (typeof input.code !== "string" || !input.code || !((input.expiresIn ?? 0) > 0))) {
    throw new Error(`messages: ${type} needs the code and its lifetime`);
  }
  const url = spec.link ? linkOf(type, origin, recipient.userId, input.code) : undefined;
  const fullName = `${recipient.firstName} ${recipient.lastName}`.trim();
  const values: PlaceholderValues = {
    DisplayName: recipient.displayName?.trim() || fullName || recipient.loginName,
    FirstName: recipient.firstName,
    LastName: recipient.lastName,
    LoginName: recipient.loginName,
    OrgName: input.orgName,
    InstanceName: input.instanceName,
    ...(spec.code ? { Code: input.code, Expiry: formatExpiry(input.expiresIn!, language) } : {}),
    ...(url ? { URL: url } : {}),
  };
  const text = (part: EmailPart) => formatText(language, keyOf(type, part), values, input.texts);

  if (spec.channel === "SMS") {
    const sms: RenderedSms = { channel: "SMS", language, text: gsmLookalikes(text("text")).trim() };
    return sms as RenderedMessage<T>;
  }
  const content: EmailContent = {
    lang: language,
    subject: oneLine(text("subject")),
    title: oneLine(text("title")),
    greeting: oneLine(text("greeting")),
    text: text("text"),
    footer: text("footer"),
    senderName: input.instanceName,
    code: spec.code ? input.code : undefined,
    link: url
      ? {
          url,
          button: oneLine(text("button")),
          hint: oneLine(formatText(language, LINK_HINT_KEY, {}, input.texts)),
        }
      : undefined,
  };
  const email: RenderedEmail = {
    channel: "EMAIL",
    language,
    subject: content.subject,
    html: emailHtml(content, input.branding),
    text: emailText(content),
  };
  return email as RenderedMessage<T>;
}
