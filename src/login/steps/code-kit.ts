/**
 * What the pages of the e-mailed codes share (./password-reset.ts, ./verify-email.ts, ./invite.ts): the
 * link's parameters (src/notifications/messages/links.ts spells them), the code commands the users API
 * uses (src/services/users/code-commands.ts), the form of a new password with its code, and the sign-in a
 * reset continues.
 *
 * A link carries only the user's ID and the code. The pages keep their errors on an auth request like
 * every step: the one of the sign-in the person came from, else a new one for the UI's own sign-in,
 * created by the first post (a GET creates nothing: mail scanners open links). After a post the code
 * typed travels back in the URL, as it came in the link; it is never stored.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import { foldUser } from "../../domain/user/commands.ts";
import { USER } from "../../domain/user/events.ts";
import { passwordPolicyGaps, passwordRequirements } from "../../domain/user/password.ts";
import {
  FailedPreconditionError,
  InternalError,
  NotFoundError,
  ResourceExhaustedError,
} from "../../errors.ts";
import { labeledDelivery } from "../../notifications/delivery.ts";
import { LINK_PARAMS } from "../../notifications/messages/links.ts";
import { UserCodes } from "../../services/users/code-commands.ts";
import type { AuthRequest, UiState } from "../auth-requests.ts";
import type { Translator } from "../i18n.ts";
import type { Login } from "../login.ts";
import { renderFragment } from "../render.ts";
import type { UserAgent } from "../user-agent.ts";
import { type Body, field, type Query, type StepKit } from "./kit.ts";

/**
 * The code commands of the users API, for the login's pages; `labelOrgId`: the organization whose branding
 * and texts their messages take instead of the recipient's (`Login.messageLabelOrg` of the sign-in).
 */
export function codesOf(login: Login, labelOrgId?: string): UserCodes {
  const { config, masterKey } = login.deps;
  if (!masterKey) throw new InternalError("codes need the master key");
  return new UserCodes({ config, masterKey, messages: labeledDelivery(login.deps.messages, labelOrgId) });
}

/**
 * What became of a new code: "sent" (queued with a provider of its channel active), "off" (no active
 * provider: the outbox records the message FAILED), "limit" (3 codes a minute for a user), "none" (the
 * user is unknown or has no address of the channel).
 */
export type CodeOutcome = "sent" | "off" | "limit" | "none";

/**
 * A new code for the user's address of `channel` through the users API's command (SendEmailCode,
 * SendPhoneCode), in the transaction of its event; its message labeled as the sign-in of `authRequest`
 * says (`Login.messageLabelOrg`).
 */
export async function sendChannelCode(
  login: Login,
  instanceId: string,
  userId: string,
  channel: "email" | "phone",
  authRequest?: AuthRequest,
): Promise<CodeOutcome> {
  const codes = codesOf(login, await login.messageLabelOrg(authRequest));
  let outcome: CodeOutcome = "sent";
  try {
    await login.deps.eventStore.push({ instanceId, creator: userId }, async (tx) => {
      const user = foldUser(await tx.load(USER, userId));
      if (!user) throw new NotFoundError("user not found");
      outcome = (await codes.providerActive(tx, instanceId, channel)) ? "sent" : "off";
      return [(await codes.channelCode(tx, instanceId, user, channel, false)).event];
    });
  } catch (error) {
    if (error instanceof ResourceExhaustedError) return "limit";
    if (error instanceof NotFoundError || error instanceof FailedPreconditionError) return "none";
    throw error;
  }
  return outcome;
}

/**
 * Checks a code of the user's address of `channel` through the users API's command (VerifyEmail,
 * VerifyPhone): true when it verified the address; a wrong try is counted (committed) before false is
 * answered. An unknown user, or one without a code to check, is false too.
 */
export async function verifyChannelCode(
  login: Login,
  instanceId: string,
  userId: string,
  channel: "email" | "phone",
  code: string,
): Promise<boolean> {
  const codes = codesOf(login);
  let verified = false;
  try {
    await login.deps.eventStore.push({ instanceId, creator: userId }, async (tx) => {
      const user = foldUser(await tx.load(USER, userId));
      if (!user) throw new NotFoundError("user not found");
      const checked = codes.verifyChannel(instanceId, user, channel, code);
      verified = checked.ok;
      return checked.events;
    });
  } catch (error) {
    if (!(error instanceof NotFoundError || error instanceof FailedPreconditionError)) throw error;
    return false;
  }
  return verified;
}

/** The user's ID and the code of a link (or of a post of its page). */
export function linkOf(values: Query | Body): { userId: string; code: string } {
  const read = (name: string) => field(values as Body, name);
  return { userId: read(LINK_PARAMS.userId), code: normalCode(read(LINK_PARAMS.code)) };
}

/** A code as typed: spaces and dashes dropped, upper case (the e-mail codes' alphabet is A–Z, 2–9). */
export function normalCode(code: string): string {
  return code.replace(/[\s-]/g, "").toUpperCase().slice(0, 64);
}

/** The page of a link, again (after a post): its parameters and the auth request. */
export function linkUrl(
  path: string,
  link: { userId: string; code?: string },
  authRequestId: string | undefined,
): string {
  const query = new URLSearchParams();
  if (link.userId) query.set(LINK_PARAMS.userId, link.userId);
  if (link.code) query.set(LINK_PARAMS.code, link.code);
  if (authRequestId) query.set("authRequest", authRequestId);
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

const CONTINUE_COOKIE = "platform_login_continue";
/** As long as an auth request lives: the reset's e-mail is opened within it or the sign-in is over anyway. */
const CONTINUE_MAX_AGE_SECONDS = 600;

function cookieOptions(request: FastifyRequest, login: Login) {
  return {
    path: "/ui/login",
    httpOnly: true,
    sameSite: "lax" as const,
    secure: login.deps.config.externalSecure || request.protocol === "https",
  };
}

/**
 * Remembers in the browser the sign-in a password reset was asked from, so the page of the e-mail's link,
 * opened in this browser, continues it. Only the auth request's ID: useless in another browser.
 */
export function rememberSignIn(
  login: Login,
  request: FastifyRequest,
  reply: FastifyReply,
  authRequest: AuthRequest,
): void {
  if (!authRequest.clientId) return; // the UI's own sign-in has nothing to continue
  reply.setCookie(CONTINUE_COOKIE, authRequest.id, {
    ...cookieOptions(request, login),
    maxAge: CONTINUE_MAX_AGE_SECONDS,
  });
}

/**
 * The auth request of a link's page: the one named in the URL (loaded as every page loads it: a page
 * saying why when it cannot be used, then undefined and `failed`), else the remembered sign-in when it
 * is still this browser's and open, else none (the post creates one).
 */
export async function requestOfLink(
  kit: StepKit,
  request: FastifyRequest,
  reply: FastifyReply,
  agent: UserAgent,
  id: string | undefined,
): Promise<{ authRequest?: AuthRequest; failed?: boolean }> {
  if (id) {
    const authRequest = await kit.loadRequest(request, reply, agent, id);
    return authRequest ? { authRequest } : { failed: true };
  }
  const remembered = request.cookies?.[CONTINUE_COOKIE];
  if (!remembered) return {};
  const { login } = kit;
  const found = await login.authRequests.find(login.instanceId(request), remembered);
  if (!found || found.expired || found.doneAt || found.userAgentHash !== agent.hash) return {};
  return { authRequest: found };
}

/** The code field, then a new password with the policy and its confirmation, for `state`. */
export function codePasswordFields(
  t: Translator["t"],
  state: UiState,
  code: string,
  minLength: number,
): Record<string, unknown>[] {
  const errors = state.fieldErrors ?? {};
  const rules = passwordRequirements.map((rule) =>
    rule === "length" ? t("policy.length", { min: minLength }) : t(`policy.${rule}`),
  );
  const list = [
    codeField(t, errors.code, code),
    passwordField(t, "password", "passwordChange.new", errors.password, {
      describedBy: ["password-policy"],
      after: renderFragment("templates/policy", { rules, t }),
    }),
    passwordField(t, "passwordConfirm", "passwordChange.confirm", errors.passwordConfirm),
  ];
  // the code from the link is filled in: the focus goes to the first field to fill
  (list.find((f) => f.error) ?? (code ? list[1] : list[0])).autofocus = true;
  return list;
}

/** The field of a code (typed, or filled in from the link). */
export function codeField(t: Translator["t"], errorKey: string | undefined, code: string) {
  const error = errorKey ? t(errorKey) : undefined;
  return {
    name: "code",
    label: t("code.label"),
    type: "text",
    autocomplete: "one-time-code",
    autocapitalize: "characters",
    maxLength: 64,
    value: code,
    error,
    describedBy: [...(error ? ["code-error"] : []), "code-help"],
    after: `<p class="help" id="code-help">${escapeHtml(t("code.help"))}</p>`,
  } as Record<string, unknown>;
}

function passwordField(
  t: Translator["t"],
  name: string,
  label: string,
  errorKey: string | undefined,
  extra: { describedBy?: string[]; after?: string } = {},
): Record<string, unknown> {
  const error = errorKey ? t(errorKey) : undefined;
  return {
    name,
    label: t(label),
    type: "password",
    autocomplete: "new-password",
    error,
    after: extra.after,
    describedBy: [...(error ? [`${name}-error`] : []), ...(extra.describedBy ?? [])],
  };
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The new password of a post and its errors (field → message key): required, the policy, the confirmation. */
export function newPasswordOf(
  body: Body,
  minLength: number,
): { password: string; errors: Record<string, string> } {
  const password = field(body, "password", { raw: true });
  const confirm = field(body, "passwordConfirm", { raw: true });
  const errors: Record<string, string> = {};
  if (!password) errors.password = "field.required";
  else if (passwordPolicyGaps(password, minLength).length) errors.password = "field.passwordPolicy";
  if (!confirm) errors.passwordConfirm = "field.required";
  else if (password && confirm !== password) errors.passwordConfirm = "field.passwordMismatch";
  return { password, errors };
}
