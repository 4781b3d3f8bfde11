/**
 * What the steps of a sign-in with an external identity provider share (the other modules of idp/): the
 * error page, the intent of a page or form, and signing the linked user in (docs/identity-providers.md).
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import { checkSession, createSession } from "../../../domain/session/commands.ts";
import { FailedPreconditionError, NotFoundError } from "../../../errors.ts";
import { issuerFor } from "../../../oidc/issuer.ts";
import type { LoginIdp } from "../../../query/idps.ts";
import type { AuthRequest } from "../../auth-requests.ts";
import type { LinkedUser } from "../../idp/accounts.ts";
import type { IdpIntent } from "../../idp/intents.ts";
import { IDP_CALLBACK_PATH } from "../../idp/login-idps.ts";
import { sendPage } from "../../render.ts";
import { newUserAgent, type UserAgent } from "../../user-agent.ts";
import { type StepKit, stepUrl } from "../kit.ts";
import { sendRegistrationCode } from "../register.ts";

/** An error page of a sign-in with a provider, linking back to the login-name page. */
export const failPage = (
  kit: StepKit,
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  message: string,
  authRequest: AuthRequest | undefined,
  provider?: string,
) =>
  kit.sendMessage(request, reply, {
    status,
    title: "error.title",
    message,
    ...(provider === undefined ? {} : { values: { provider } }),
    link: back(authRequest),
    ...(authRequest ? { authRequest } : {}),
  });

/** The link of an error page: back to the login-name page. */
export const back = (authRequest?: AuthRequest) => ({
  url: stepUrl("loginname", authRequest?.id),
  text: "error.back",
});

/** The callback URL providers send the browser back to (at the request's host). */
export const redirectUriOf = (kit: StepKit, request: FastifyRequest) =>
  `${issuerFor(kit.login.deps.config, request.scope.host)}${IDP_CALLBACK_PATH}`;

/** The provider of an intent, still active in the intent's organization; else the 404 page. */
export async function idpOf(
  kit: StepKit,
  request: FastifyRequest,
  reply: FastifyReply,
  intent: IdpIntent,
  authRequest: AuthRequest,
) {
  const idp = await kit.idps.active(intent.instanceId, intent.orgId, intent.idpId);
  if (!idp) await failPage(kit, request, reply, 404, "idp.unavailable", authRequest);
  return idp ?? undefined;
}

/** The intent and auth request of a page (query) or form (body); the error page when unusable. */
export async function intentOf(
  kit: StepKit,
  request: FastifyRequest,
  reply: FastifyReply,
  agent: UserAgent,
  source: Record<string, unknown>,
): Promise<{ intent: IdpIntent; authRequest: AuthRequest; idp: LoginIdp } | undefined> {
  const authRequest = await kit.loadRequest(request, reply, agent, String(source.authRequest ?? ""));
  if (!authRequest) return undefined;
  const intent = await kit.idps.intents.find(
    kit.login.instanceId(request),
    String(source.intent ?? ""),
    agent.hash,
  );
  if (!intent?.external || intent.authRequestId !== authRequest.id) {
    await failPage(kit, request, reply, 400, "idp.intentUnknown", authRequest);
    return undefined;
  }
  const idp = await idpOf(kit, request, reply, intent, authRequest);
  return idp ? { intent, authRequest, idp } : undefined;
}

/**
 * Signs the user in for the auth request (checking the session of this browser again, or a new one),
 * marking the provider's check, and continues to the completion. A user just created with an unverified
 * e-mail address is sent its code (VERIFY_EMAIL, as after a local registration) and continues to the
 * verification page first, which completes the sign-in (or skips the code).
 */
export async function signIn(
  kit: StepKit,
  request: FastifyRequest,
  reply: FastifyReply,
  authRequest: AuthRequest,
  intent: IdpIntent,
  user: LinkedUser,
): Promise<FastifyReply> {
  const { login } = kit;
  const { eventStore } = login.deps;
  const instanceId = intent.instanceId;
  const actor = { instanceId, creator: user.id };
  const existing = (await kit.sessionsFor(request, authRequest)).find((s) => s.userId === user.id);
  const fresh = newUserAgent();
  let sessionId: string;
  try {
    sessionId = existing
      ? (await checkSession(eventStore, actor, { sessionId: existing.id, idpId: intent.idpId }, login.policy))
          .sessionId
      : (
          await createSession(
            eventStore,
            actor,
            { user, userAgentHash: fresh.hash, idpId: intent.idpId },
            login.policy,
          )
        ).sessionId;
  } catch (error) {
    if (error instanceof FailedPreconditionError || error instanceof NotFoundError) {
      const message =
        error.message === "user is locked"
          ? "error.locked"
          : error.message === "user is inactive"
            ? "error.inactive"
            : "idp.accountUnusable";
      return failPage(kit, request, reply, 400, message, authRequest);
    }
    throw error;
  }
  // signed in: the browser gets a new cookie (no session fixation)
  await login.adoptUserAgent(request, reply, fresh, authRequest);
  await kit.idps.intents.finish(intent);
  await login.authRequests.attachSession(authRequest, sessionId);
  let next = stepUrl("complete", authRequest.id);
  if (user.unverifiedEmail) {
    const notice = await sendRegistrationCode(login, instanceId, user.id, user.unverifiedEmail, authRequest);
    await login.authRequests.setUiState(authRequest, { page: "verify-email", values: { notice } });
    next = stepUrl("verify-email", authRequest.id);
  } else await login.authRequests.setUiState(authRequest, {});
  if (request.method === "POST") return reply.redirect(next, 303);
  // Back from the provider: the browser came here by redirects from the provider's own form post, and
  // browsers apply that page's CSP form-action to every further redirect (to the application). A page
  // that moves on by itself (and a link for browsers that do not) starts a new navigation.
  const context = await kit.pageFor(request, fresh, authRequest);
  const { t } = context.translator;
  return sendPage(reply, context, "templates/message", {
    title: t("idp.continueTitle"),
    message: t("idp.continueText"),
    alert: false,
    refreshUrl: next,
    linkUrl: next,
    linkText: t("formPost.submit"),
  });
}

/** The page of an intent after the callback: linking to a local account, or registering. */
export function intentUrl(page: "link" | "register", authRequest: AuthRequest, intent: IdpIntent): string {
  const query = new URLSearchParams({ authRequest: authRequest.id, intent: intent.id });
  return `/ui/login/idp/${page}?${query}`;
}
