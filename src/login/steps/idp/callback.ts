/**
 * GET /ui/login/idp/callback: back from the provider: the code exchange, then which user the identity is,
 * by the provider's options in this order: an existing link signs in (`is_auto_update` refreshes names and
 * e-mail first); `auto_linking` USERNAME / EMAIL proposes the one matching user of the organization
 * (EMAIL: a verified address, and only when exactly one user matches), who proves the local password
 * (./link.ts); `is_auto_creation` creates the user and links it; `is_manual_creation_allowed` shows the
 * prefilled registration form (./register.ts); `is_manual_linking_allowed` lets the person sign in
 * locally to link (./link.ts). A sign-in with a link marks the session `session.idp.checked`.
 */
import type { FastifyInstance } from "fastify";
import { AlreadyExistsError } from "../../../errors.ts";
import { autoUpdate, createLinkedUser, linkedUser, proposal, valuesOf } from "../../idp/accounts.ts";
import { type ExternalIdentity, finishAuthorization } from "../../idp/provider.ts";
import { readUserAgent } from "../../user-agent.ts";
import type { Query, StepKit } from "../kit.ts";
import { validateRegistration } from "../register.ts";
import { failPage, idpOf, intentUrl, redirectUriOf, signIn } from "./kit.ts";
import { PAGE as REGISTER_PAGE } from "./register.ts";

export function idpCallbackStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  const { db, eventStore } = login.deps;
  ui.get<{ Querystring: Query }>("/login/idp/callback", async (request, reply) => {
    const agent = readUserAgent(request);
    const instanceId = login.instanceId(request);
    const intent = agent
      ? await kit.idps.intents.find(instanceId, String(request.query.state ?? ""), agent.hash)
      : undefined;
    if (!agent || !intent || intent.external)
      return failPage(kit, request, reply, 400, "idp.intentUnknown", undefined);
    const authRequest = await kit.loadRequest(request, reply, agent, intent.authRequestId);
    if (!authRequest) return reply;
    const idp = await idpOf(kit, request, reply, intent, authRequest);
    if (!idp) return reply;
    if (request.query.error) {
      await kit.idps.intents.finish(intent);
      return failPage(kit, request, reply, 400, "idp.denied", authRequest, idp.name);
    }
    let external: ExternalIdentity;
    try {
      const callbackUrl = new URL(redirectUriOf(kit, request));
      callbackUrl.search = new URL(request.url, "http://x").search;
      external = await finishAuthorization(idp, kit.idps.access, callbackUrl, {
        state: intent.id,
        nonce: intent.nonce,
        codeVerifier: intent.codeVerifier,
      });
      if (!external.id) throw new Error("the provider answered no subject");
    } catch (error) {
      request.log.warn({ err: error, idpId: idp.id }, "sign-in with identity provider failed");
      await kit.idps.intents.finish(intent);
      return failPage(kit, request, reply, 502, "idp.providerError", authRequest, idp.name);
    }
    if (!(await kit.idps.intents.setExternal(intent, external)))
      return failPage(kit, request, reply, 400, "idp.intentUnknown", authRequest);

    const linked = await linkedUser(db, instanceId, idp.id, external.id);
    if (linked) {
      // only users of the requested organization can sign in to it
      if (authRequest.orgId !== undefined && linked.orgId !== authRequest.orgId)
        return failPage(kit, request, reply, 403, "idp.otherOrganization", authRequest);
      if (idp.options.isAutoUpdate) await autoUpdate(eventStore, instanceId, linked.id, external);
      return signIn(kit, request, reply, authRequest, intent, linked);
    }
    const { options } = idp;
    if (await proposal(db, instanceId, idp, intent))
      return reply.redirect(intentUrl("link", authRequest, intent), 302);
    if (options.isAutoCreation) {
      const values = valuesOf(external);
      const errors = validateRegistration(values);
      if (Object.keys(errors).length === 0) {
        try {
          const user = await createLinkedUser(login, request, authRequest, intent, idp, values);
          return signIn(kit, request, reply, authRequest, intent, user);
        } catch (error) {
          if (!(error instanceof AlreadyExistsError)) throw error;
          // e.g. the username is taken: the form lets the person choose another (when allowed)
          if (options.isManualCreationAllowed) {
            await login.authRequests.setUiState(authRequest, {
              page: REGISTER_PAGE,
              error: "error.formInvalid",
              values,
              fieldErrors: error.message.includes("username") ? { username: "field.usernameTaken" } : {},
            });
            return reply.redirect(intentUrl("register", authRequest, intent), 302);
          }
        }
      } else if (options.isManualCreationAllowed) {
        await login.authRequests.setUiState(authRequest, {
          page: REGISTER_PAGE,
          error: "error.formInvalid",
          values,
          fieldErrors: errors,
        });
        return reply.redirect(intentUrl("register", authRequest, intent), 302);
      }
    }
    if (options.isManualCreationAllowed)
      return reply.redirect(intentUrl("register", authRequest, intent), 302);
    if (options.isManualLinkingAllowed) return reply.redirect(intentUrl("link", authRequest, intent), 302);
    await kit.idps.intents.finish(intent);
    return failPage(kit, request, reply, 403, "idp.noAccount", authRequest, idp.name);
  });
}
