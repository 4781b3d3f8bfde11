/**
 * GET /ui/login/idp/start?idp=<id>[&authRequest=<id>]: to the provider (state, nonce, PKCE S256). Without
 * an auth request it starts the UI's own sign-in (the account page). The providers offered are those
 * active in the organization of the sign-in (the requested organization of scope
 * `urn:platform:iam:org:id:<id>`, else the organization of the application's project, else the instance's
 * default organization; `LoginIdps.signInOrg`, ../../idp/login-idps.ts).
 *
 * "Continue with …" are links (GET), not forms: the page's CSP `form-action` would also apply to the
 * redirect to the provider.
 */
import type { FastifyInstance } from "fastify";
import type { AuthRequest } from "../../auth-requests.ts";
import { newIntentId } from "../../idp/intents.ts";
import { authorizationRequest } from "../../idp/provider.ts";
import type { Query, StepKit } from "../kit.ts";
import { failPage, redirectUriOf } from "./kit.ts";

export function idpStartStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  ui.get<{ Querystring: Query }>("/login/idp/start", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const instanceId = login.instanceId(request);
    let authRequest: AuthRequest | undefined;
    if (request.query.authRequest) {
      authRequest = await kit.loadRequest(request, reply, agent, request.query.authRequest);
      if (!authRequest) return reply;
    } else {
      // the UI's own sign-in (account page)
      authRequest = await login.authRequests.create({
        instanceId,
        clientId: "",
        redirectUri: "/",
        responseType: "code",
        scope: [],
        userAgentHash: agent.hash,
      });
    }
    const orgId = await kit.idps.signInOrg(request, authRequest);
    // the login policy of the sign-in's organization may rule identity providers out
    if (!(await login.loginPolicy(instanceId, orgId)).allow_external_idp)
      return failPage(kit, request, reply, 403, "idp.notAllowed", authRequest);
    const idp = await kit.idps.active(instanceId, orgId, String(request.query.idp ?? ""));
    if (!idp) return failPage(kit, request, reply, 404, "idp.unavailable", authRequest);
    const id = newIntentId();
    let url: URL;
    try {
      const made = await authorizationRequest(idp, kit.idps.access, redirectUriOf(kit, request), id);
      url = made.url;
      await kit.idps.intents.create({
        id,
        instanceId,
        authRequestId: authRequest.id,
        idpId: idp.id,
        orgId,
        userAgentHash: agent.hash,
        nonce: made.checks.nonce,
        codeVerifier: made.checks.codeVerifier,
      });
    } catch (error) {
      request.log.warn({ err: error, idpId: idp.id }, "identity provider unreachable");
      return failPage(kit, request, reply, 502, "idp.providerError", authRequest, idp.name);
    }
    return reply.redirect(url.href, 302);
  });
}
