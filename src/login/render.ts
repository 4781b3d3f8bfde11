/**
 * Rendering of the login UI's pages: eta templates (each step's page beside its module in ./steps, the
 * layout and shared parts in ./templates; names are paths relative to this directory; autoEscape: every
 * `<%= %>` is HTML-escaped; `<%~ %>` is used only for other templates' output and the one constant script), the
 * stylesheet as a static asset with its content hash in the URL, and each page's Content-Security-Policy.
 *
 * Page CSP: `default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self' <client>;
 * frame-ancestors 'none'; base-uri 'none'`. `form-action` also names the origin of the auth request's
 * redirect URI because browsers apply it to the redirects that follow a form post (password → 303 →
 * client). The form_post page adds `script-src 'sha256-…'` for exactly its one inline script; the WebAuthn
 * pages `script-src 'self'` for the served ./assets/webauthn.js (no inline script).
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { Eta } from "eta";
import type { FastifyReply } from "fastify";
import type { PageBranding } from "./branding.ts";
import type { Translator } from "./i18n.ts";
import type { LanguageLink } from "./language-picker.ts";

const here = import.meta.dirname;

const eta = new Eta({
  views: here,
  autoEscape: true,
  cache: true,
  autoTrim: [false, "nl"],
});

/** The stylesheet, served at `STYLESHEET.url` with an immutable cache. */
export const STYLESHEET = (() => {
  const body = readFileSync(path.join(here, "assets", "login.css"));
  const hash = createHash("sha256").update(body).digest("hex").slice(0, 16);
  return { body, hash, url: `/ui/assets/login.${hash}.css` };
})();

/** The WebAuthn forms' script (./assets/webauthn.js), served at `WEBAUTHN_SCRIPT.url` like the stylesheet. */
export const WEBAUTHN_SCRIPT = (() => {
  const body = readFileSync(path.join(here, "assets", "webauthn.js"));
  const hash = createHash("sha256").update(body).digest("hex").slice(0, 16);
  return { body, hash, url: `/ui/assets/webauthn.${hash}.js` };
})();

/** The form_post page's only script: submits the form at once (the button serves browsers without JS). */
const FORM_POST_SCRIPT = 'document.getElementById("form-post").submit();';
const FORM_POST_SCRIPT_HASH = `'sha256-${createHash("sha256").update(FORM_POST_SCRIPT).digest("base64")}'`;

/** The CSP source allowing form posts (and their redirects) to `uri`: its origin, or its custom scheme. */
export function cspSourceOf(uri: string): string | undefined {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return undefined;
  }
  if (url.protocol === "http:" || url.protocol === "https:") {
    return /^https?:\/\/[A-Za-z0-9.-]+(:\d+)?$/.test(url.origin) ? url.origin : undefined;
  }
  return /^[a-z][a-z0-9+.-]*:$/.test(url.protocol) ? url.protocol : undefined;
}

export function contentSecurityPolicy(
  options: { formTargets?: string[]; scriptHashes?: string[]; scripts?: boolean } = {},
) {
  const targets = (options.formTargets ?? []).map(cspSourceOf).filter((s): s is string => s !== undefined);
  const directives = [
    "default-src 'none'",
    "style-src 'self'",
    "img-src 'self' data:",
    `form-action ${["'self'", ...new Set(targets)].join(" ")}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ];
  if (options.scriptHashes?.length) directives.push(`script-src ${options.scriptHashes.join(" ")}`);
  // the served scripts only (./assets/webauthn.js), never inline ones
  else if (options.scripts) directives.push("script-src 'self'");
  return directives.join("; ");
}

/** What every page needs. */
export interface PageContext {
  translator: Translator;
  instanceName: string;
  /** Where this page's forms (and the redirects after them) may go besides this origin. */
  formTargets?: string[];
  /** Form hidden fields. */
  csrf?: string;
  authRequestId?: string;
  /** The language picker's links (./language-picker.ts); none: no picker. */
  languages?: LanguageLink[];
  /** The languages the instance (or the sign-in's organization) allows, for every choice of a language. */
  allowedLanguages?: readonly string[];
  /** The organization's (or instance's) colours, logo, icon and what they hide (./branding.ts). */
  branding?: PageBranding;
}

/** The HTML of a template with the page context (title translated by the caller). */
export function renderHtml(
  template: string,
  context: PageContext,
  data: { title: string } & Record<string, unknown>,
): string {
  const { translator } = context;
  return eta.render(template, {
    ...data,
    t: translator.t,
    lang: translator.lang,
    instanceName: context.instanceName,
    cssUrl: STYLESHEET.url,
    brandingCssUrl: context.branding?.stylesheet?.url,
    logo: context.branding?.logo,
    icon: context.branding?.icon,
    watermark: !context.branding?.hideWatermark,
    csrf: context.csrf,
    authRequestId: context.authRequestId,
    languages: context.languages ?? [],
  });
}

/** The HTML of a template without the page layout (a fragment another template includes raw). */
export function renderFragment(template: string, data: Record<string, unknown>): string {
  return eta.render(template, data);
}

/** Sends a page with its CSP; the server adds the other security headers to every HTML response. */
export function sendPage(
  reply: FastifyReply,
  context: PageContext,
  template: string,
  data: { title: string } & Record<string, unknown>,
  options: { status?: number; scriptHashes?: string[]; scripts?: boolean } = {},
): FastifyReply {
  const html = renderHtml(template, context, {
    ...data,
    webauthnScriptUrl: options.scripts ? WEBAUTHN_SCRIPT.url : undefined,
  });
  return reply
    .code(options.status ?? 200)
    .header(
      "content-security-policy",
      contentSecurityPolicy({
        formTargets: context.formTargets,
        scriptHashes: options.scriptHashes,
        scripts: options.scripts,
      }),
    )
    .type("text/html; charset=utf-8")
    .send(html);
}

/**
 * The auto-submitting form of `response_mode=form_post`: posts `fields` to `action` at once, with a
 * "Continue" button for browsers without JavaScript. Its CSP allows exactly the one inline script (by
 * hash) and form posts to `action`'s origin.
 */
export function renderFormPost(
  context: Omit<PageContext, "formTargets" | "csrf" | "authRequestId" | "languages">,
  action: string,
  fields: Record<string, string>,
): { html: string; contentSecurityPolicy: string } {
  const html = renderHtml("templates/form-post", context, {
    title: context.translator.t("formPost.title"),
    action,
    fields,
    script: FORM_POST_SCRIPT,
  });
  return {
    html,
    contentSecurityPolicy: contentSecurityPolicy({
      formTargets: [action],
      scriptHashes: [FORM_POST_SCRIPT_HASH],
    }),
  };
}

/** Sends the form_post page. */
export function sendFormPost(
  reply: FastifyReply,
  context: Omit<PageContext, "formTargets" | "csrf" | "authRequestId" | "languages">,
  action: string,
  fields: Record<string, string>,
): FastifyReply {
  const page = renderFormPost(context, action, fields);
  return reply
    .code(200)
    .header("content-security-policy", page.contentSecurityPolicy)
    .type("text/html; charset=utf-8")
    .send(page.html);
}

/** Initials for an avatar: first letters of the first and last word of a name. */
export function initials(name: string): string {
  const words = name.trim().split(/\s+/).filter(Boolean);
  if (words.length === 0) return "?";
  const first = [...words[0]][0] ?? "";
  const last = words.length > 1 ? ([...words[words.length - 1]][0] ?? "") : "";
  return (first + last).toUpperCase();
}
