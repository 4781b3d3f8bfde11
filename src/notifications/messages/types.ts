/**
 * The notification messages: their types, the channel each goes by, the texts (catalogue keys) each is
 * made of and the placeholders those texts may use. This is what a text-settings API lists (`texts/_keys`)
 * and checks an administrator's text against (./texts.ts `checkText`).
 *
 * Keys are `message.<type in lower case>.<part>`; an e-mail has the parts subject, title, greeting, text,
 * footer and, when it carries a link, button; an SMS has text only. One key is shared by every e-mail
 * with a link: `message.layout.link_hint` (the line above the link spelled out in full).
 */

export const MESSAGE_TYPES = [
  "INIT",
  "VERIFY_EMAIL",
  "VERIFY_PHONE",
  "PASSWORD_RESET",
  "PASSWORD_CHANGED",
  "EMAIL_CHANGED",
  "OTP_EMAIL",
  "OTP_SMS",
] as const;
export type MessageType = (typeof MESSAGE_TYPES)[number];

export type Channel = "EMAIL" | "SMS";

/**
 * Every placeholder a text may use, as an ICU argument (`{DisplayName}`):
 *
 * - `DisplayName`, `FirstName`, `LastName`: the recipient's profile (DisplayName falls back to
 *   "FirstName LastName", then LoginName, when the profile has none)
 * - `LoginName`: the name the recipient signs in with (`alice@acme.example.com`)
 * - `OrgName`: the recipient's organization
 * - `InstanceName`: the instance (the name the login UI shows)
 * - `Code`: the one-time code
 * - `URL`: the link into the login UI (./links.ts)
 * - `Expiry`: how long the code stays valid, in words of the message's language ("1 hour", "1 Stunde")
 */
export const PLACEHOLDERS = [
  "DisplayName",
  "FirstName",
  "LastName",
  "LoginName",
  "OrgName",
  "InstanceName",
  "Code",
  "URL",
  "Expiry",
] as const;
export type Placeholder = (typeof PLACEHOLDERS)[number];

/** The placeholders of every message: who it is for and where from. */
const RECIPIENT: readonly Placeholder[] = [
  "DisplayName",
  "FirstName",
  "LastName",
  "LoginName",
  "OrgName",
  "InstanceName",
];

export interface MessageSpec {
  channel: Channel;
  /** The placeholders its texts may use. */
  placeholders: readonly Placeholder[];
  /** Whether it carries a one-time code (then also `Expiry`). */
  code: boolean;
  /** Whether it links into the login UI (`URL`, the button). */
  link: boolean;
  /**
   * Placeholders its `text` must contain: a message whose only purpose is the code must show it, since it
   * has no link to carry it.
   */
  required: readonly Placeholder[];
}

function spec<C extends Channel, K extends boolean, L extends boolean>(
  channel: C,
  code: K,
  link: L,
): MessageSpec & { channel: C; code: K; link: L } {
  const placeholders = [
    ...RECIPIENT,
    ...(code ? (["Code", "Expiry"] as const) : []),
    ...(link ? (["URL"] as const) : []),
  ];
  return { channel, placeholders, code, link, required: code && !link ? ["Code"] : [] };
}

export const MESSAGES = {
  /** Invitation: the account exists, the recipient sets a first password (`/ui/login/invite`). */
  INIT: spec("EMAIL", true, true),
  /** Proves an e-mail address (`/ui/login/verify-email`). */
  VERIFY_EMAIL: spec("EMAIL", true, true),
  /** Proves a phone number: the code is typed into the login UI. */
  VERIFY_PHONE: spec("SMS", true, false),
  /** A new password after a forgotten one (`/ui/login/password-reset`). */
  PASSWORD_RESET: spec("EMAIL", true, true),
  /** Tells that the password changed; links to the sign-in page, carries no code. */
  PASSWORD_CHANGED: spec("EMAIL", false, true),
  /**
   * Tells the previous e-mail address that the account's address changed (sent there, not to the new
   * one); links to the sign-in page, carries no code.
   */
  EMAIL_CHANGED: spec("EMAIL", false, true),
  /** A sign-in code (second factor) sent by e-mail. */
  OTP_EMAIL: spec("EMAIL", true, false),
  /** A sign-in code (second factor) sent by SMS. */
  OTP_SMS: spec("SMS", true, false),
} as const satisfies Readonly<Record<MessageType, MessageSpec>>;

/** The types sent by SMS (text only). */
export type SmsMessageType = {
  [T in MessageType]: (typeof MESSAGES)[T]["channel"] extends "SMS" ? T : never;
}[MessageType];

/** The types that carry a one-time code (their data has `code` and `expiresIn`). */
export type CodeMessageType = {
  [T in MessageType]: (typeof MESSAGES)[T]["code"] extends true ? T : never;
}[MessageType];

/** The e-mail line above the link spelled out in full, shared by every message with a link. */
export const LINK_HINT_KEY = "message.layout.link_hint";

export type EmailPart = "subject" | "title" | "greeting" | "text" | "button" | "footer";

/** The parts (and so the keys) of a message type, in the order they appear. */
export function partsOf(type: MessageType): EmailPart[] {
  const { channel, link }: MessageSpec = MESSAGES[type];
  if (channel === "SMS") return ["text"];
  return link
    ? ["subject", "title", "greeting", "text", "button", "footer"]
    : ["subject", "title", "greeting", "text", "footer"];
}

export const keyOf = (type: MessageType, part: EmailPart): string => `message.${type.toLowerCase()}.${part}`;

/** The keys of a message type's texts, with the placeholders each may use (for a `texts/_keys` listing). */
export function textKeys(type: MessageType): { key: string; placeholders: readonly Placeholder[] }[] {
  const keys = partsOf(type).map((part) => ({
    key: keyOf(type, part),
    placeholders: MESSAGES[type].placeholders,
  }));
  if (MESSAGES[type].link) keys.push({ key: LINK_HINT_KEY, placeholders: [] });
  return keys;
}

/** The message type and part a key names, or the shared link hint; undefined for any other key. */
export function parseKey(
  key: string,
): { type?: MessageType; part?: EmailPart; placeholders: readonly Placeholder[] } | undefined {
  if (key === LINK_HINT_KEY) return { placeholders: [] };
  const match = /^message\.([a-z_]+)\.([a-z]+)$/.exec(key);
  if (!match) return undefined;
  const type = MESSAGE_TYPES.find((t) => t.toLowerCase() === match[1]);
  if (!type) return undefined;
  const part = partsOf(type).find((p) => p === match[2]);
  return part ? { type, part, placeholders: MESSAGES[type].placeholders } : undefined;
}
