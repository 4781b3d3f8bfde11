/**
 * GET, POST /ui/login/passkey: "Sign in with a passkey" (passwordless). The page asks the browser for a
 * discoverable credential (no login name: empty allowCredentials, user verification required); the user is
 * the credential's. A passed assertion checks the browser's session of that user, or creates one, with the
 * `webauthn` factor, then completes. The challenge is kept on the auth request (`ui_state.passkey`), also
 * for the login-name page's conditional mediation (the browser offers the passkeys in the name's autofill),
 * and is used up by a sign-in. Rate-limited per IP; one answer for every failure of the passkey itself.
 *
 * The login policy's `passwordless_allowed` gates the step, checked before anything is stored. Off for the
 * sign-in (the auth request's organization, else the instance): the page is a 403 message page linking
 * back to the login-name page, and its POST answers 303 back to it. Off in the policy of the credential's
 * user (its organization's, or the instance's for an account above it: `Login.userLoginPolicy`): the POST
 * answers 303 to the login-name page with the error.
 */
import { generateAuthenticationOptions } from "@simplewebauthn/server";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { checkSession, createSession } from "../../../domain/session/commands.ts";
import { credentialIdOf, WEBAUTHN_TIMEOUT_MS, webAuthnCheck } from "../../../domain/user/factors/webauthn.ts";
import { PlatformError } from "../../../errors.ts";
import { factorByCredentialId } from "../../../query/user-factors.ts";
import type { AuthRequest } from "../../auth-requests.ts";
import { sendPage } from "../../render.ts";
import { newUserAgent } from "../../user-agent.ts";
import { loginRelyingParty, postedCredential } from "../../webauthn.ts";
import { continueWithSession } from "../complete.ts";
import { type Body, errorOn, type Query, type StepKit, stepUrl } from "../kit.ts";

const PAGE = "passkey";
const NOT_ALLOWED = "error.passkeyNotAllowed";
const TEMPLATE = "steps/passkey/sign-in";

/**
 * The request options of a passkey sign-in for `authRequest`, its challenge kept on the request (the
 * page's error stays): JSON for the page's form.
 */
export async function passkeySignInOptions(
  kit: StepKit,
  request: FastifyRequest,
  authRequest: AuthRequest,
): Promise<string> {
  const rp = await loginRelyingParty(kit.login, request);
  const options = await generateAuthenticationOptions({
    rpID: rp.id,
    allowCredentials: [],
    userVerification: "required",
    timeout: WEBAUTHN_TIMEOUT_MS,
  });
  await kit.login.authRequests.setUiState(authRequest, {
    ...authRequest.uiState,
    passkey: {
      challenge: options.challenge,
      rpId: rp.id,
      origins: rp.origins,
      createdAt: new Date().toISOString(),
    },
  });
  return JSON.stringify(options);
}

export function passkeyStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  const { db, eventStore } = login.deps;

  const passwordlessAllowed = async (instanceId: string, orgId: string | undefined) =>
    (await login.loginPolicy(instanceId, orgId)).passwordless_allowed;

  const notAllowedPage = (request: FastifyRequest, reply: FastifyReply, authRequest?: AuthRequest) =>
    kit.sendMessage(request, reply, {
      status: 403,
      title: "passkey.title",
      message: NOT_ALLOWED,
      authRequest,
      link: { url: stepUrl("loginname", authRequest?.id), text: "error.back" },
    });

  ui.get<{ Querystring: Query }>("/login/passkey", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const instanceId = login.instanceId(request);
    if (!request.query.authRequest) {
      if (!(await passwordlessAllowed(instanceId, undefined))) return notAllowedPage(request, reply);
      // the UI's own sign-in (to the account page): a request of its own first
      const own = await login.authRequests.create({
        instanceId,
        clientId: "",
        redirectUri: "/",
        responseType: "code",
        scope: [],
        userAgentHash: agent.hash,
      });
      return reply.redirect(stepUrl(PAGE, own.id), 302);
    }
    const authRequest = await kit.loadRequest(request, reply, agent, request.query.authRequest);
    if (!authRequest) return reply;
    if (!(await passwordlessAllowed(instanceId, authRequest.orgId)))
      return notAllowedPage(request, reply, authRequest);
    const context = await kit.pageFor(request, agent, authRequest);
    const { t } = context.translator;
    const error = errorOn(authRequest, PAGE).error;
    return sendPage(
      reply,
      context,
      TEMPLATE,
      {
        title: t("passkey.title"),
        error,
        options: await passkeySignInOptions(kit, request, authRequest),
        otherWayUrl: stepUrl("loginname", authRequest.id),
      },
      { scripts: true },
    );
  });

  ui.post("/login/passkey", async (request, reply) => {
    const agent = await kit.checkForm(request, reply);
    if (!agent) return reply;
    const authRequest = await kit.requestOfForm(request, reply, agent);
    if (!authRequest) return reply;
    const instanceId = login.instanceId(request);
    // the page says it is not allowed
    if (!(await passwordlessAllowed(instanceId, authRequest.orgId)))
      return reply.redirect(stepUrl(PAGE, authRequest.id), 303);
    const tooMany = await kit.limitPerIp(request, reply, authRequest);
    if (tooMany) return reply;
    const fail = async () => {
      await login.authRequests.setUiState(authRequest, { page: PAGE, error: "error.passkeyFailed" });
      return reply.redirect(stepUrl(PAGE, authRequest.id), 303);
    };
    const challenge = authRequest.uiState.passkey;
    const response = postedCredential(request.body as Body);
    if (!challenge || !response) return fail();
    if (Date.now() - Date.parse(challenge.createdAt) > WEBAUTHN_TIMEOUT_MS) return fail();
    const id = credentialIdOf(response);
    const credential = id ? await factorByCredentialId(db, instanceId, id) : undefined;
    // only users of the requested organization can sign in to it
    if (!credential || (authRequest.orgId !== undefined && credential.orgId !== authRequest.orgId))
      return fail();
    // the policy of the user (its organization's, or the instance's for an account above it)
    const userPolicy = await login.userLoginPolicy(instanceId, credential);
    if (!userPolicy.passwordless_allowed) {
      await login.authRequests.setUiState(authRequest, { page: "loginname", error: NOT_ALLOWED });
      return reply.redirect(stepUrl("loginname", authRequest.id), 303);
    }
    const check = webAuthnCheck(response, {
      challenge: challenge.challenge,
      rpId: challenge.rpId,
      origins: challenge.origins,
      userVerification: "required",
    });
    const actor = { instanceId, creator: credential.userId };
    const existing = (await kit.sessionsFor(request, authRequest)).find(
      (s) => s.userId === credential.userId,
    );
    const fresh = newUserAgent();
    let sessionId: string;
    try {
      sessionId = existing
        ? (
            await checkSession(
              eventStore,
              actor,
              {
                sessionId: existing.id,
                factors: [check],
                of: { userId: existing.userId, orgId: existing.orgId },
              },
              login.policy,
            )
          ).sessionId
        : (
            await createSession(
              eventStore,
              actor,
              {
                user: { id: credential.userId, orgId: credential.orgId },
                userAgentHash: fresh.hash,
                factors: [check],
              },
              login.policy,
            )
          ).sessionId;
    } catch (error) {
      // a wrong assertion (counted), a locked or deactivated user, a lockout: one answer
      if (error instanceof PlatformError && error.httpStatus < 500) return fail();
      throw error;
    }
    // signed in: the browser gets a new cookie (no session fixation)
    await login.adoptUserAgent(request, reply, fresh, authRequest);
    return continueWithSession(kit, request, reply, authRequest, sessionId);
  });
}
