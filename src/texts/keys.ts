/**
 * Every text an administrator may override, by API key:
 *
 * - `login.<catalogue key>`: each text of the login UI's catalogues (src/login/locales), e.g.
 *   `login.password.title`. Its placeholders are its ICU arguments, capitalized (`{instance}` is
 *   `{{.Instance}}`).
 * - `message.<type>.<part>` and `message.layout.link_hint`: the texts of the messages
 *   (src/notifications/messages/types.ts), with the placeholders of their message type.
 *
 * The list follows the catalogues: a text added to the English login catalogue is a key at once, with a
 * description made from its page (below) and its English text.
 */
import { catalogues as loginCatalogues } from "../login/i18n.ts";
import {
  LINK_HINT_KEY,
  MESSAGE_TYPES,
  type MessageType,
  catalogues as messageCatalogues,
  textKeys,
} from "../notifications/messages/index.ts";
import { argumentsOf, fromIcu } from "./format.ts";

export interface TextKeyInfo {
  key: string;
  description: string;
  /** Placeholder names (`Instance`, `DisplayName`), written `{{.Name}}` in a text. */
  placeholders: readonly string[];
  /** Where the text is used: the login UI's translator or the messages. */
  kind: "login" | "message";
  /** The key in its catalogue. */
  catalogueKey: string;
  /** The ICU argument of each placeholder. */
  argumentOf: (placeholder: string) => string;
}

export const LOGIN_PREFIX = "login.";

const capitalize = (name: string) => name.charAt(0).toUpperCase() + name.slice(1);
const decapitalize = (name: string) => name.charAt(0).toLowerCase() + name.slice(1);

/** Where the texts of each part of the login catalogue appear (the first segment of its keys). */
const LOGIN_SECTIONS: Record<string, string> = {
  layout: "every page",
  loginname: "the login-name page",
  password: "the password page",
  passwordChange: "the page that asks for a new password",
  select: "the account selection page",
  register: "the registration page",
  policy: "the password requirements list",
  signedout: "the signed-out page",
  logout: "the sign-out confirmation page",
  account: "the account page",
  formPost: "the page that returns to the application",
  error: "error messages",
  field: "form field errors",
  idp: "sign-in with external identity providers",
  language: "language names (language picker, account page)",
  passwordReset: "the password reset pages",
  code: "the code field",
  verifyEmail: "the e-mail verification page",
  invite: "the invitation page",
  mfaChoose: "the page choosing the second factor",
  mfaSetup: "the prompt to register a second factor",
};

const MESSAGE_NAMES: Record<MessageType, string> = {
  INIT: "invitation e-mail",
  VERIFY_EMAIL: "e-mail address verification e-mail",
  VERIFY_PHONE: "phone number verification SMS",
  PASSWORD_RESET: "password reset e-mail",
  PASSWORD_CHANGED: "password changed e-mail",
  EMAIL_CHANGED: "e-mail address changed e-mail (to the previous address)",
  OTP_EMAIL: "sign-in code e-mail",
  OTP_SMS: "sign-in code SMS",
};

const PART_NAMES: Record<string, string> = {
  subject: "subject",
  title: "heading",
  greeting: "greeting",
  text: "text",
  button: "button label",
  footer: "footer",
};

/** "“Enter your password”", cut short when long. */
function quoted(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return `“${line.length > 80 ? `${line.slice(0, 79)}…` : line}”`;
}

function loginKeys(): TextKeyInfo[] {
  const english = loginCatalogues.en;
  return Object.keys(english).map((catalogueKey) => {
    // every language's arguments: the translator passes the same values whatever the language
    const argumentsUsed: string[] = [];
    for (const catalogue of Object.values(loginCatalogues)) {
      if (catalogue[catalogueKey] === undefined) continue;
      for (const name of argumentsOf(catalogue[catalogueKey]))
        if (!argumentsUsed.includes(name)) argumentsUsed.push(name);
    }
    const argumentOf = (placeholder: string) =>
      argumentsUsed.find((name) => capitalize(name) === placeholder) ?? decapitalize(placeholder);
    const section = LOGIN_SECTIONS[catalogueKey.split(".", 1)[0]];
    const where = section ? `Login UI, ${section}` : "Login UI";
    return {
      key: `${LOGIN_PREFIX}${catalogueKey}`,
      description: `${where}: ${quoted(fromIcu(english[catalogueKey], capitalize))}`,
      placeholders: argumentsUsed.map(capitalize),
      kind: "login" as const,
      catalogueKey,
      argumentOf,
    };
  });
}

function messageKeys(): TextKeyInfo[] {
  const keys: TextKeyInfo[] = [];
  for (const type of MESSAGE_TYPES) {
    for (const { key, placeholders } of textKeys(type)) {
      if (keys.some((k) => k.key === key)) continue;
      const part = key.slice(key.lastIndexOf(".") + 1);
      const description =
        key === LINK_HINT_KEY
          ? "Every e-mail with a link: the line above the link spelled out in full"
          : `The ${MESSAGE_NAMES[type]}: ${PART_NAMES[part] ?? part}`;
      keys.push({
        key,
        description: `${description}; English: ${quoted(fromIcu(messageCatalogues.en[key], (n) => n))}`,
        placeholders,
        kind: "message",
        catalogueKey: key,
        argumentOf: (placeholder) => placeholder,
      });
    }
  }
  return keys;
}

/** Every text key, sorted. */
export const TEXT_KEYS: ReadonlyMap<string, TextKeyInfo> = new Map(
  [...loginKeys(), ...messageKeys()].sort((a, b) => a.key.localeCompare(b.key)).map((k) => [k.key, k]),
);

const builtIn = new Map<string, string>();

/** The built-in text of `key` in `language`, in the API's format (English where the language has none). */
export function builtInText(info: TextKeyInfo, language: string): string {
  const memo = `${language}\u0000${info.key}`;
  let text = builtIn.get(memo);
  if (text === undefined) {
    const catalogues = info.kind === "login" ? loginCatalogues : messageCatalogues;
    const message = catalogues[language]?.[info.catalogueKey] ?? catalogues.en[info.catalogueKey];
    text = fromIcu(message, info.kind === "login" ? capitalize : (name) => name);
    builtIn.set(memo, text);
  }
  return text;
}
