/**
 * What the second-factor pages share (./totp.ts, ./otp.ts, ./recovery.ts, ./setup-totp.ts, ./setup-otp.ts):
 * the sign-in's session they act on, a check on it through the session commands (as the password page
 * does: `checkSession` without a token, the session being the browser's), and the answer to a failed one
 * as a message key for `ui_state`.
 *
 * Each page acts on the session the auth request was signed in with (`authRequest.sessionId`, one of the
 * browser's live sessions); without one the entry decides again.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import { renderSVG } from "uqr";
import {
  type ChallengeMaker,
  checkSession,
  type FactorCheck,
  FactorLockedOutError,
  PasswordLockedOutError,
} from "../../../domain/session/commands.ts";
import type { ChallengeType } from "../../../domain/session/events.ts";
import { foldUser } from "../../../domain/user/commands.ts";
import { USER } from "../../../domain/user/events.ts";
import { readFactor } from "../../../domain/user/factors/common.ts";
import { pendingTotpSecret, totpLabel, totpUri } from "../../../domain/user/factors/totp.ts";
import {
  FailedPreconditionError,
  InternalError,
  InvalidArgumentError,
  NotFoundError,
  ResourceExhaustedError,
} from "../../../errors.ts";
import { UserFactorCommands } from "../../../services/users/factor-commands.ts";
import type { AuthRequest } from "../../auth-requests.ts";
import type { Login } from "../../login.ts";
import type { LoginSession } from "../../sessions.ts";
import type { UserAgent } from "../../user-agent.ts";
import { completeOrContinue } from "../complete.ts";
import { entryUrl, type StepKit, stepUrl } from "../kit.ts";

/** The page of a second-factor step, `/ui/login/mfa/<name>`. */
export const mfaUrl = (name: string, authRequestId: string) => stepUrl(`mfa/${name}`, authRequestId);

/** The master key the factors' secrets and codes need. */
export function masterKeyOf(login: Login): Buffer {
  const key = login.deps.masterKey;
  if (!key) throw new InternalError("second factors need the master key");
  return key;
}

/** The auth request of a page and its signed-in session, or undefined when an answer was sent. */
export interface MfaRequest {
  agent: UserAgent;
  authRequest: AuthRequest;
  session: LoginSession;
  instanceId: string;
}

/** GET: the auth request named in the query and its session (no session: back to the entry). */
export async function mfaPage(
  kit: StepKit,
  request: FastifyRequest,
  reply: FastifyReply,
  authRequestId: string | undefined,
): Promise<MfaRequest | undefined> {
  const agent = kit.login.userAgent(request, reply);
  const authRequest = await kit.loadRequest(request, reply, agent, authRequestId);
  if (!authRequest) return undefined;
  return withSession(kit, request, reply, agent, authRequest);
}

/** POST: the CSRF check, the form's auth request and its session. */
export async function mfaPost(
  kit: StepKit,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<MfaRequest | undefined> {
  const agent = await kit.checkForm(request, reply);
  if (!agent) return undefined;
  const authRequest = await kit.requestOfForm(request, reply, agent);
  if (!authRequest) return undefined;
  return withSession(kit, request, reply, agent, authRequest);
}

async function withSession(
  kit: StepKit,
  request: FastifyRequest,
  reply: FastifyReply,
  agent: UserAgent,
  authRequest: AuthRequest,
): Promise<MfaRequest | undefined> {
  const session = authRequest.sessionId
    ? (await kit.sessionsFor(request, authRequest)).find((s) => s.id === authRequest.sessionId)
    : undefined;
  // a second factor follows a first one: no authenticated session, no second factor yet
  if (!session?.authTime) {
    reply.redirect(entryUrl(authRequest.id), request.method === "POST" ? 303 : 302);
    return undefined;
  }
  return { agent, authRequest, session, instanceId: kit.login.instanceId(request) };
}

/**
 * The outcome of a check: the challenges' answers and the time of the session's last event (the check's,
 * when one passed), or the message key of the failure.
 */
export type CheckOutcome =
  | { ok: true; answers: Partial<Record<ChallengeType, unknown>>; at: Date }
  | { ok: false; error: string; values?: Record<string, string> };

/**
 * Runs `factors` and `challenges` on the sign-in's session, the user as creator. A wrong answer counts (the
 * session commands commit it); every failure becomes a message key.
 */
export async function checkOnSession(
  login: Login,
  instanceId: string,
  session: LoginSession,
  input: { factors?: FactorCheck[]; challenges?: ChallengeMaker[] },
): Promise<CheckOutcome> {
  try {
    const version = await checkSession(
      login.deps.eventStore,
      { instanceId, creator: session.userId },
      { sessionId: session.id, of: { userId: session.userId, orgId: session.orgId }, ...input },
      login.policy,
    );
    return { ok: true, answers: version.challenges, at: version.changeDate };
  } catch (error) {
    // the factor's own lockout (or, for a page that checks a password too, the password's)
    if (error instanceof FactorLockedOutError || error instanceof PasswordLockedOutError)
      return { ok: false, error: "mfaOtp.lockedOut" };
    if (error instanceof InvalidArgumentError) return { ok: false, error: "mfaOtp.codeWrong" };
    // the bound of codes sent (src/domain/user/factors/otp-sends.ts): the code sent last stays valid
    if (error instanceof ResourceExhaustedError)
      return {
        ok: false,
        error: "mfaOtp.tooManyCodes",
        values: { seconds: String(Math.max(1, Math.ceil(error.retryAfterSeconds ?? 60))) },
      };
    if (error instanceof FailedPreconditionError)
      return {
        ok: false,
        error: /challenge/.test(error.message) ? "mfaOtp.codeExpired" : "mfaOtp.unavailable",
      };
    if (error instanceof NotFoundError) return { ok: false, error: "mfaOtp.unavailable" };
    throw error;
  }
}

/** The code field of a page (one-time code autocomplete), with its error. */
export function mfaCodeField(t: (key: string) => string, error: string | undefined, label: string) {
  return {
    name: "code",
    label: t(label),
    type: "text",
    autocomplete: "one-time-code",
    autocapitalize: "characters",
    maxLength: 64,
    value: "",
    error: error ? t(error) : undefined,
    describedBy: error ? ["code-error"] : [],
    autofocus: true,
  } as Record<string, unknown>;
}

/**
 * After a failed post: the error on the auth request for `page`, and 303 back to that page. Pages are named
 * after their paths: `mfa-<name>` is /ui/login/mfa/<name>, `setup-<name>` is /ui/login/mfa/setup/<name>.
 */
export async function retry(
  kit: StepKit,
  reply: FastifyReply,
  authRequest: AuthRequest,
  page: string,
  error: string,
) {
  await kit.login.authRequests.setUiState(authRequest, { page, error });
  return reply.redirect(mfaUrl(page.replace(/^mfa-/, "").replace(/^setup-/, "setup/"), authRequest.id), 303);
}

/**
 * After a passed check: the sign-in goes on where it stands, completed at once when nothing more is needed
 * (`completeOrContinue`, the completion's own decision, without its redirect).
 */
export async function passed(
  kit: StepKit,
  request: FastifyRequest,
  reply: FastifyReply,
  authRequest: AuthRequest,
  /** The session as the passed check left it (`withCodeCheck`); else it is read again. */
  session?: LoginSession,
) {
  await kit.login.authRequests.setUiState(authRequest, {});
  return completeOrContinue(kit, request, reply, authRequest, { session });
}

/**
 * A TOTP registration to show (the setup page, the account page): the pending one of the last minutes
 * (so a wrong code does not change the QR code), else a new pending one (user command, the user as
 * creator). Undefined when the user has an active TOTP.
 */
export async function totpEnrolment(
  login: Login,
  instanceId: string,
  userId: string,
): Promise<{ secret: string; uri: string; qr: string } | undefined> {
  const masterKey = masterKeyOf(login);
  const { db, eventStore } = login.deps;
  const current = await readFactor(db, instanceId, userId, "totp");
  if (current?.active) return undefined;
  let secret = pendingTotpSecret(masterKey, instanceId, userId, current);
  let uri = "";
  if (secret) {
    const { issuer, account } = await totpLabel(db, instanceId, userId);
    uri = totpUri(issuer, account, secret);
  } else {
    await eventStore.push({ instanceId, creator: userId }, async (tx) => {
      const user = foldUser(await tx.load(USER, userId));
      if (!user) throw new NotFoundError("user not found");
      const made = await new UserFactorCommands({ masterKey }).registerTotp(tx, instanceId, user);
      secret = made.secret;
      uri = made.uri;
      return made.events;
    });
  }
  const qr = renderSVG(uri).replace(
    "<svg ",
    '<svg width="200" height="200" aria-hidden="true" focusable="false" ',
  );
  return { secret: secret!, uri, qr };
}

/** A base32 secret in groups of four, for typing. */
export const groupedSecret = (secret: string) => secret.replace(/(.{4})(?=.)/g, "$1 ");
