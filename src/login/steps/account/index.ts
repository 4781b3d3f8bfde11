/**
 * GET /: the account page for browsers, a JSON pointer for API clients. The one page outside /ui (no form
 * parser, no rate limits, the server's own error pages); its forms post to /ui/login/account/* (./profile.ts,
 * ./contact.ts, ./password.ts, ./links.ts, ./sessions.ts), each answering 303 back here (./kit.ts).
 *
 * The page shows the browser's accounts (its live sessions) and manages one of them: the most recent, or
 * the one chosen with `?account=<session ID>` (a session of this browser; any other ID shows the most
 * recent). Sections: the profile, the custom data of the user's schema (./data.ts; none without a schema), e-mail and phone (each changed, and proved with a code), the password
 * (with the policy), the links to external identity providers, the sessions of this browser.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { supportedLanguages } from "../../../domain/settings/languages.ts";
import type { Translator } from "../../i18n.ts";
import type { Login } from "../../login.ts";
import { sendPage } from "../../render.ts";
import type { LoginSession } from "../../sessions.ts";
import { csrfToken } from "../../user-agent.ts";
import { accountView, type Query, stepUrl } from "../kit.ts";
import { contactFields } from "./contact.ts";
import { dataFields, hasWritable, readAccountData } from "./data.ts";
import { type AccountOutcome, accountUrl, takeOutcome } from "./kit.ts";
import { accountPasskeys } from "./passkeys.ts";
import { passwordFields } from "./password.ts";
import { PROFILE_LIMITS, profileFields } from "./profile.ts";
import { securityOtpView } from "./security-otp.ts";

export { accountContactStep } from "./contact.ts";
export { accountDataStep } from "./data.ts";
export { accountLinksStep } from "./links.ts";
export { accountPasskeysStep } from "./passkeys.ts";
export { accountPasswordStep } from "./password.ts";
export { accountProfileStep } from "./profile.ts";
export { accountSecurityOtpStep } from "./security-otp.ts";
export { accountSessionsStep } from "./sessions.ts";

/** Its template, beside this module. */
const TEMPLATE = "steps/account/account";

/** The chosen account's user: what the forms show. */
export interface AccountUser {
  givenName: string;
  familyName: string;
  displayName: string;
  nickName: string;
  preferredLanguage: string;
  email: string;
  emailVerified: boolean;
  phone: string;
  phoneVerified: boolean;
  hasPassword: boolean;
}

async function readAccountUser(login: Login, instanceId: string, userId: string): Promise<AccountUser> {
  const [row] = await login.deps.db.query<{
    given_name: string | null;
    family_name: string | null;
    display_name: string | null;
    nick_name: string | null;
    preferred_language: string | null;
    email: string | null;
    email_verified: boolean | null;
    phone: string | null;
    phone_verified: boolean | null;
    has_password: boolean;
  }>(
    `SELECT given_name, family_name, display_name, nick_name, preferred_language, email, email_verified,
            phone, phone_verified, password_hash IS NOT NULL AS has_password
       FROM users WHERE instance_id = $1 AND id = $2`,
    [instanceId, userId],
  );
  return {
    givenName: row?.given_name ?? "",
    familyName: row?.family_name ?? "",
    displayName: row?.display_name ?? "",
    nickName: row?.nick_name ?? "",
    preferredLanguage: row?.preferred_language ?? "",
    email: row?.email ?? "",
    emailVerified: row?.email_verified === true,
    phone: row?.phone ?? "",
    phoneVerified: row?.phone_verified === true,
    hasPassword: row?.has_password === true,
  };
}

/** The user's links to external identity providers, with the provider's name (its ID once it is gone). */
async function readLinks(login: Login, instanceId: string, userId: string) {
  return login.deps.db.query<{ idp_id: string; idp_name: string | null; external_username: string }>(
    `SELECT l.idp_id, i.name AS idp_name, l.external_username
       FROM user_idp_links l LEFT JOIN idps i ON i.instance_id = l.instance_id AND i.id = l.idp_id
      WHERE l.instance_id = $1 AND l.user_id = $2 ORDER BY l.created_at, l.idp_id`,
    [instanceId, userId],
  );
}

/** A message key of a stored outcome, translated; undefined for a key the catalogue lacks. */
function say(t: Translator["t"], key: unknown, values?: Record<string, string | number>): string | undefined {
  if (typeof key !== "string") return undefined;
  try {
    return t(key, values);
  } catch {
    return undefined; // an outcome cookie edited by hand: nothing to show
  }
}

export function accountStep(app: FastifyInstance, login: Login): void {
  app.get<{ Querystring: Query }>("/", async (request, reply) => {
    reply.header("vary", "Accept, Cookie");
    const accept = String(request.headers.accept ?? "");
    if (!accept.includes("text/html")) {
      return reply.send({
        message: "Platform identity server. Browsers get the account page here.",
        discovery: "/.well-known/openid-configuration",
        docs: "/docs",
        openapi: "/openapi.json",
      });
    }
    const sessions = await login.accountSessionsOfUserAgent(request);
    if (sessions.length === 0) return reply.redirect(stepUrl("loginname"), 302);
    const current = sessions.find((s) => s.id === request.query.account) ?? sessions[0];
    return sendAccountPage(login, request, reply, sessions, current);
  });
}

async function sendAccountPage(
  login: Login,
  request: FastifyRequest,
  reply: FastifyReply,
  sessions: LoginSession[],
  current: LoginSession,
): Promise<FastifyReply> {
  const agent = login.userAgent(request, reply);
  const instanceId = login.instanceId(request);
  const outcome: AccountOutcome | undefined = takeOutcome(
    request,
    reply,
    current.id,
    login.deps.config.externalSecure,
  );
  const [user, links, customData] = await Promise.all([
    readAccountUser(login, instanceId, current.userId),
    readLinks(login, instanceId, current.userId),
    readAccountData(login.deps.db, instanceId, current.userId),
  ]);
  const context = await login.pageContext(request, { csrf: csrfToken(agent), userOrgId: current.orgId });
  const hideSuffix = context.branding?.hideLoginNameSuffix;
  const { t, dateTime } = context.translator;
  const state = (form: string) => (outcome?.form === form ? outcome : undefined);
  const formState = (form: string) => {
    const s = state(form);
    return {
      error: say(t, s?.error),
      notice: say(t, s?.notice),
      fieldErrors: Object.fromEntries(
        Object.entries(s?.fieldErrors ?? {})
          .map(([name, key]) => [name, say(t, key, { max: PROFILE_LIMITS.maxLength })])
          .filter((entry): entry is [string, string] => entry[1] !== undefined),
      ),
      values: s?.values ?? {},
    };
  };
  const profile = formState("profile");
  const dataState = formState("data");
  const customFields = customData && dataFields(t, customData, dataState);
  const email = formState("email");
  const phone = formState("phone");
  const password = formState("password");
  const linkState = formState("links");
  const sessionState = formState("sessions");
  const otp = await securityOtpView(login, instanceId, current, formState("otp"), t);
  const passkeys = await accountPasskeys(login, instanceId, current.userId, context.translator);
  const addPasskeyUrl = (type: string) =>
    `/ui/login/account/passkeys/new?session=${encodeURIComponent(current.id)}&type=${type}`;
  return sendPage(reply, context, TEMPLATE, {
    title: t("account.title"),
    session: current.id,
    current: { ...accountView(current, hideSuffix), email: current.email },
    user,
    profile: {
      ...profile,
      fields: profileFields(t, user, profile),
      // only what the instance allows (its restricted languages), as everywhere a language is chosen
      languages: (context.allowedLanguages ?? supportedLanguages).map((lang) => ({
        value: lang,
        label: t(`language.${lang}`),
      })),
    },
    // without a schema, no section; a post's error still shows (the schema was taken away meanwhile)
    data: customFields
      ? { ...dataState, fields: customFields, writable: hasWritable(customFields) }
      : dataState.error && { ...dataState, fields: [], writable: false },
    contact: {
      email,
      phone,
      fields: contactFields(t, user, { email, phone }),
    },
    password: {
      ...password,
      fields: passwordFields(t, login.deps.config.passwordMinLength, password),
    },
    otp,
    links: {
      ...linkState,
      items: links.map((link) => ({
        idpId: link.idp_id,
        name: link.idp_name ?? link.idp_id,
        externalUsername: link.external_username,
      })),
    },
    passkeys: {
      ...formState("passkeys"),
      items: passkeys,
      // the same rule as the other factors (../../sign-in-changes.ts)
      allowed: otp.allowed,
      addPasskeyUrl: addPasskeyUrl("passkey"),
      addSecurityKeyUrl: addPasskeyUrl("u2f"),
    },
    sessions: {
      ...sessionState,
      items: sessions.map((s) => ({
        ...accountView(s, hideSuffix),
        current: s.id === current.id,
        manageUrl: accountUrl(s.id),
        lastSignIn: s.authTime ? t("account.lastSignIn", { time: dateTime(s.authTime) }) : undefined,
      })),
    },
  });
}
