/**
 * The language picker of the login pages: links in every page's footer, one per language the context's
 * restricted languages allow, each named in its own language. A link leads to `/ui/login/language`
 * (./steps/language.ts), which keeps the choice in the `platform_lang` cookie (a year, SameSite=Lax,
 * Path=/) and sends the browser back to the page it came from. Without JavaScript, like every page.
 *
 * The picked language wins over the auth request's `ui_locales` and Accept-Language (./i18n.ts
 * `chooseLanguage`), as in ZITADEL and Keycloak: the person chose it on our pages, after the application
 * asked. A language the context does not allow (any more) is ignored.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import { translator } from "./i18n.ts";

export const LANGUAGE_COOKIE = "platform_lang";
const COOKIE_MAX_AGE_SECONDS = 365 * 24 * 60 * 60;
export const LANGUAGE_PATH = "/ui/login/language";

/** The language the browser picked (its cookie), if well formed. */
export function pickedLanguage(request: FastifyRequest): string | undefined {
  const value = request.cookies?.[LANGUAGE_COOKIE];
  return value && /^[a-z]{2}$/.test(value) ? value : undefined;
}

export function setPickedLanguage(
  request: FastifyRequest,
  reply: FastifyReply,
  language: string,
  externalSecure: boolean,
): void {
  reply.setCookie(LANGUAGE_COOKIE, language, {
    path: "/",
    httpOnly: true,
    sameSite: "lax",
    secure: externalSecure || request.protocol === "https",
    maxAge: COOKIE_MAX_AGE_SECONDS,
  });
}

/**
 * Whether the picker may send the browser back to `target`: a path of this server's login UI or the
 * account page, never another site (`//host`, `/\host`) or anything but a page.
 */
export function returnable(target: string): boolean {
  if (target.length > 2048 || /[\\\s]/.test(target) || target.startsWith("//")) return false;
  return /^\/(\?|$)/.test(target) || /^\/ui\/login(\/|\?|$)/.test(target);
}

/** The page a picker link returns to: this GET page, else the auth request's next step, else none. */
export function returnTarget(request: FastifyRequest, authRequestId?: string): string | undefined {
  const target =
    request.method === "GET"
      ? request.url
      : authRequestId
        ? `/ui/login?authRequest=${encodeURIComponent(authRequestId)}`
        : undefined;
  return target && returnable(target) ? target : undefined;
}

export interface LanguageLink {
  lang: string;
  /** The language's name in itself ("Deutsch"). */
  label: string;
  /** Undefined for the language of the page. */
  url?: string;
}

/** Each language's name in itself ("Deutsch"), from its own catalogue. */
const labels = new Map<string, string>();
const labelOf = (lang: string) => {
  let label = labels.get(lang);
  if (label === undefined) {
    label = translator(lang).t(`language.${lang}`);
    labels.set(lang, label);
  }
  return label;
};

/** The picker's links; none when there is nothing to choose or no page to return to. */
export function languageLinks(
  allowed: readonly string[],
  current: string,
  returnTo: string | undefined,
): LanguageLink[] {
  if (allowed.length < 2 || returnTo === undefined) return [];
  return allowed.map((lang) => ({
    lang,
    label: labelOf(lang),
    url:
      lang === current
        ? undefined
        : `${LANGUAGE_PATH}?${new URLSearchParams({ lang, return: returnTo }).toString()}`,
  }));
}
