/**
 * Sign-in with external identity providers (the login UI's part of docs/identity-providers.md):
 *
 *   GET  /ui/login/idp/start?idp=<id>[&authRequest=<id>]  to the provider (state, nonce, PKCE S256)
 *   GET  /ui/login/idp/callback                          back from the provider: code exchange, mapping
 *   GET  /ui/login/idp/link?intent=…                     link to a local account after its password
 *   POST /ui/login/idp/link
 *   GET  /ui/login/idp/register?intent=…                 the registration form, prefilled from the provider
 *   POST /ui/login/idp/register
 *
 * The providers offered are those active in the organization of the sign-in (the requested organization
 * of scope `urn:platform:iam:org:id:<id>`, else the organization of the application's project, else the
 * instance's default organization). The identity the provider answers maps to a user by the provider's
 * options, in this order: an existing link signs in (`is_auto_update` refreshes names and e-mail first);
 * `auto_linking` USERNAME / EMAIL proposes the one matching user of the organization (EMAIL: a verified
 * address, and only when exactly one user matches), who proves the local password; `is_auto_creation`
 * creates the user and links it; `is_manual_creation_allowed` shows the prefilled registration form
 * (read-only fields while auto creation is on, e.g. when the username was taken); `is_manual_linking_allowed`
 * lets the person sign in locally to link. A sign-in with a link marks the session `session.idp.checked`.
 *
 * "Continue with …" are links (GET), not forms: the page's CSP `form-action` would also apply to the
 * redirect to the provider.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { IDP } from "../../domain/idp/events.ts";
import { INSTANCE } from "../../domain/instance/events.ts";
import { ORG } from "../../domain/org/events.ts";
import { holdOrg } from "../../domain/org/locks.ts";
import { PROJECT } from "../../domain/project/events.ts";
import { checkSession, createSession, findUser } from "../../domain/session/commands.ts";
import {
  addHumanEvent,
  addIdpLinkEvents,
  changeUserEvents,
  foldUser,
  idpLinkAddedEvent,
} from "../../domain/user/commands.ts";
import { USER, type UserChangedPayload } from "../../domain/user/events.ts";
import { usernameKey } from "../../domain/user/username.ts";
import { AlreadyExistsError, FailedPreconditionError, NotFoundError } from "../../errors.ts";
import { newId } from "../../id.ts";
import { fetchThrough, HttpCaller } from "../../net/http.ts";
import type { OutboundLevel } from "../../net/outbound.ts";
import { issuerFor } from "../../oidc/issuer.ts";
import { appByClientId } from "../../query/apps.ts";
import { activeIdpForOrg, activeIdpsForOrg, type LoginIdp } from "../../query/idps.ts";
import type { AuthRequest, UiState } from "../auth-requests.ts";
import type { Translator } from "../i18n.ts";
import type { Login } from "../login.ts";
import { checkPasswordForSignIn } from "../password.ts";
import { initials, type PageContext, sendPage } from "../render.ts";
import type { LoginSession } from "../sessions.ts";
import { readUserAgent, type UserAgent } from "../user-agent.ts";
import { type IdpIntent, IdpIntentStore, newIntentId } from "./intents.ts";
import {
  authorizationRequest,
  type ExternalIdentity,
  finishAuthorization,
  type ProviderAccess,
} from "./provider.ts";

type Body = Record<string, string | string[] | undefined>;
type Query = Record<string, string | undefined>;

export const IDP_CALLBACK_PATH = "/ui/login/idp/callback";
/** The scope that sends the person straight to one provider. */
export const IDP_SCOPE = /^urn:platform:iam:org:idp:id:([A-Za-z0-9_-]{1,200})$/;

/** The provider a scope `urn:platform:iam:org:idp:id:<id>` names, if any. */
export function requestedIdpOf(scope: readonly string[]): string | undefined {
  for (const value of scope) {
    const match = IDP_SCOPE.exec(value);
    if (match) return match[1];
  }
  return undefined;
}

/** What the login routes lend the provider routes (./../routes.ts). */
export interface IdpRouteTools {
  field(body: Body | undefined, name: string, options?: { raw?: boolean }): string;
  stepUrl(step: string, authRequestId?: string): string;
  loadRequest(
    request: FastifyRequest,
    reply: FastifyReply,
    agent: UserAgent,
    id: string | undefined,
  ): Promise<AuthRequest | undefined>;
  checkForm(request: FastifyRequest, reply: FastifyReply): Promise<UserAgent | undefined>;
  pageFor(
    request: FastifyRequest,
    agent: UserAgent,
    authRequest: AuthRequest | undefined,
  ): Promise<PageContext>;
  sessionsFor(request: FastifyRequest, authRequest: AuthRequest): Promise<LoginSession[]>;
  sendMessage(
    request: FastifyRequest,
    reply: FastifyReply,
    options: {
      status: number;
      title: string;
      message: string;
      values?: Record<string, string | number>;
      link?: { url: string; text: string };
      authRequest?: AuthRequest;
    },
  ): Promise<FastifyReply>;
  /** The 429 page when a password post is one too many (per IP, then per login name); else undefined. */
  limitPassword(
    request: FastifyRequest,
    reply: FastifyReply,
    authRequest: AuthRequest,
    loginName: string,
  ): Promise<FastifyReply | undefined>;
  /** The register page's field list (labels, autocomplete, errors) for `state`. */
  registerFields(
    t: Translator["t"],
    state: UiState,
    options: { withPassword: boolean; readOnly: string[] },
  ): Record<string, unknown>[];
  /** Checks the registration values; answers field → error key. */
  validateRegistration(values: Record<string, string>): Record<string, string>;
}

/** The providers of the login-name page and the path of each one's "Continue with" link. */
export interface IdpButton {
  id: string;
  name: string;
  url: string;
}

/**
 * How long the login-name page reuses an organization's provider list. This process's own changes to
 * providers, policies and organizations apply at once, another process's when its notification arrives;
 * this bounds an entry's age should one be lost (the start route checks the provider again, so a provider
 * deactivated meanwhile is refused there).
 */
const BUTTONS_CACHE_MS = 5_000;
/** Bounds of one request to a provider (discovery documents and key sets are small). */
const PROVIDER_TIMEOUT_MS = 10_000;
const PROVIDER_MAX_RESPONSE_BYTES = 1024 * 1024;
const BUTTONS_CACHE_MAX = 10_000;
/** Events that change which providers the login-name page shows. */
const FORGETTING = new Set([IDP, ORG, PROJECT, INSTANCE]);

export class LoginIdps {
  readonly intents: IdpIntentStore;
  /** Requests to providers: per level of the outbound-address policy, with a timeout and a size limit. */
  readonly access: ProviderAccess;
  /** One caller per level, so that a kept-alive connection never serves another level. */
  private readonly http: HttpCaller[];
  /** Per instance and organization: the active providers' IDs and names (the login-name page's hot path). */
  private readonly buttonCache = new Map<string, { idps: { id: string; name: string }[]; until: number }>();

  constructor(private readonly login: Login) {
    this.intents = new IdpIntentStore(login.deps.db);
    const { config, outbound } = login.deps;
    const caller = (level: OutboundLevel) =>
      new HttpCaller({
        guard: outbound.guard(level),
        maxResponseBytes: PROVIDER_MAX_RESPONSE_BYTES,
        userAgent: "Platform-Login/1",
      });
    const instance = caller("instance");
    const organization = caller("organization");
    this.http = [instance, organization];
    this.access = {
      codehostBIssuer: config.idpCodehostBIssuer,
      fetch: {
        instance: fetchThrough(instance, PROVIDER_TIMEOUT_MS),
        organization: fetchThrough(organization, PROVIDER_TIMEOUT_MS),
      },
    };
    login.deps.eventStore.onCommitted((events) => {
      for (const e of events) {
        // the organization of a sign-in without one requested: its app's (apps are events of their
        // project), else the instance's default one
        if (FORGETTING.has(e.aggregateType)) this.forgetInstance(e.instanceId);
      }
    });
    login.deps.eventStore.onStale(() => this.buttonCache.clear());
  }

  /** Closes the kept-alive connections to providers. */
  close(): void {
    for (const caller of this.http) caller.close();
  }

  private forgetInstance(instanceId: string): void {
    for (const key of this.buttonCache.keys()) {
      if (key.startsWith(`${instanceId}\u0000`)) this.buttonCache.delete(key);
    }
  }

  /** The organization of a sign-in: requested by scope, else the app's project's, else the default. */
  async signInOrg(request: FastifyRequest, authRequest: AuthRequest | undefined): Promise<string> {
    if (authRequest?.orgId) return authRequest.orgId;
    if (authRequest?.clientId) {
      const app = await appByClientId(
        this.login.deps.db,
        this.login.instanceId(request),
        authRequest.clientId,
      );
      if (app) return app.orgId;
    }
    return (await this.login.instance(request)).defaultOrgId;
  }

  /** The "Continue with <name>" links of the login-name page. */
  async buttons(request: FastifyRequest, authRequest: AuthRequest | undefined): Promise<IdpButton[]> {
    const { masterKey, db } = this.login.deps;
    if (!masterKey) return [];
    const instanceId = this.login.instanceId(request);
    // by the organization requested, else by the app (its organization is looked up on a miss only)
    const key = authRequest?.orgId
      ? `${instanceId}\u0000${authRequest.orgId}`
      : `${instanceId}\u0000${authRequest?.clientId ? `app:${authRequest.clientId}` : ""}`;
    let cached = this.buttonCache.get(key);
    if (!cached || cached.until <= Date.now()) {
      const orgId = await this.signInOrg(request, authRequest);
      const idps = await activeIdpsForOrg(db, masterKey, instanceId, orgId);
      cached = { idps: idps.map(({ id, name }) => ({ id, name })), until: Date.now() + BUTTONS_CACHE_MS };
      if (this.buttonCache.size >= BUTTONS_CACHE_MAX)
        this.buttonCache.delete(this.buttonCache.keys().next().value!);
      this.buttonCache.set(key, cached);
    }
    return cached.idps.map((idp) => ({ ...idp, url: startUrl(idp.id, authRequest?.id) }));
  }

  /** The provider if it is active in the organization; null otherwise (or without a master key). */
  async active(instanceId: string, orgId: string, idpId: string): Promise<LoginIdp | null> {
    const { masterKey, db } = this.login.deps;
    if (!masterKey) return null;
    return activeIdpForOrg(db, masterKey, instanceId, orgId, idpId);
  }
}

export function startUrl(idpId: string, authRequestId?: string): string {
  const query = new URLSearchParams({ idp: idpId });
  if (authRequestId) query.set("authRequest", authRequestId);
  return `/ui/login/idp/start?${query}`;
}

function intentUrl(page: "link" | "register", authRequest: AuthRequest, intent: IdpIntent): string {
  const query = new URLSearchParams({ authRequest: authRequest.id, intent: intent.id });
  return `/ui/login/idp/${page}?${query}`;
}

interface LinkedUser {
  id: string;
  orgId: string;
}

export async function registerIdpRoutes(
  ui: FastifyInstance,
  login: Login,
  idps: LoginIdps,
  tools: IdpRouteTools,
): Promise<void> {
  const { config, db, eventStore } = login.deps;
  const { field, stepUrl } = tools;
  ui.addHook("onClose", async () => idps.close());

  /** An error page of a sign-in with a provider, linking back to the login-name page. */
  const failPage = (
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    message: string,
    authRequest: AuthRequest | undefined,
    provider?: string,
  ) =>
    tools.sendMessage(request, reply, {
      status,
      title: "error.title",
      message,
      ...(provider === undefined ? {} : { values: { provider } }),
      link: back(authRequest),
      ...(authRequest ? { authRequest } : {}),
    });

  const back = (authRequest?: AuthRequest) => ({
    url: stepUrl("loginname", authRequest?.id),
    text: "error.back",
  });

  const redirectUriOf = (request: FastifyRequest) =>
    `${issuerFor(config, request.scope.host)}${IDP_CALLBACK_PATH}`;

  /** The provider of an intent, still active in the intent's organization; else the 404 page. */
  async function idpOf(
    request: FastifyRequest,
    reply: FastifyReply,
    intent: IdpIntent,
    authRequest: AuthRequest,
  ) {
    const idp = await idps.active(intent.instanceId, intent.orgId, intent.idpId);
    if (!idp) await failPage(request, reply, 404, "idp.unavailable", authRequest);
    return idp ?? undefined;
  }

  /** The intent and auth request of a page (query) or form (body); the error page when unusable. */
  async function intentOf(
    request: FastifyRequest,
    reply: FastifyReply,
    agent: UserAgent,
    source: Record<string, unknown>,
  ): Promise<{ intent: IdpIntent; authRequest: AuthRequest; idp: LoginIdp } | undefined> {
    const authRequest = await tools.loadRequest(request, reply, agent, String(source.authRequest ?? ""));
    if (!authRequest) return undefined;
    const intent = await idps.intents.find(
      login.instanceId(request),
      String(source.intent ?? ""),
      agent.hash,
    );
    if (!intent?.external || intent.authRequestId !== authRequest.id) {
      await failPage(request, reply, 400, "idp.intentUnknown", authRequest);
      return undefined;
    }
    const idp = await idpOf(request, reply, intent, authRequest);
    return idp ? { intent, authRequest, idp } : undefined;
  }

  /** The user an identity is linked to (any organization of the instance). */
  async function linkedUser(
    instanceId: string,
    idpId: string,
    externalId: string,
  ): Promise<LinkedUser | undefined> {
    const rows = await db.query<{ user_id: string; org_id: string }>(
      "SELECT user_id, org_id FROM user_idp_links WHERE instance_id = $1 AND idp_id = $2 AND external_user_id = $3",
      [instanceId, idpId, externalId],
    );
    return rows[0] ? { id: rows[0].user_id, orgId: rows[0].org_id } : undefined;
  }

  /**
   * The account auto linking proposes: the one human user of the organization with the identity's
   * username, or (EMAIL) with the identity's e-mail address verified on both sides. None when several match.
   */
  async function proposal(instanceId: string, idp: LoginIdp, intent: IdpIntent) {
    const external = intent.external!;
    const mode = idp.options.autoLinking;
    let rows: { id: string; username: string; display_name: string | null; primary_domain: string | null }[];
    const select = `SELECT u.id, u.username, u.display_name, o.primary_domain FROM users u
      LEFT JOIN orgs o ON o.instance_id = u.instance_id AND o.id = u.org_id
      WHERE u.instance_id = $1 AND u.org_id = $2 AND u.type = 1`;
    if (mode === "username" && external.username) {
      rows = await db.query(`${select} AND u.username_key = $3 LIMIT 2`, [
        instanceId,
        intent.orgId,
        usernameKey(external.username),
      ]);
    } else if (mode === "email" && external.email && external.emailVerified) {
      rows = await db.query(`${select} AND lower(u.email) = lower($3) AND u.email_verified LIMIT 2`, [
        instanceId,
        intent.orgId,
        external.email,
      ]);
    } else return undefined;
    if (rows.length !== 1) return undefined;
    const row = rows[0];
    const loginName = row.primary_domain ? `${row.username}@${row.primary_domain}` : row.username;
    return { userId: row.id, loginName, displayName: row.display_name ?? "" };
  }

  /** Names and e-mail from the provider, applied to the user when they differ (`is_auto_update`). */
  async function autoUpdate(instanceId: string, userId: string, external: ExternalIdentity): Promise<void> {
    const change: UserChangedPayload = {};
    if (external.givenName) change.given_name = external.givenName;
    if (external.familyName) change.family_name = external.familyName;
    if (external.displayName) change.display_name = external.displayName;
    if (external.email) {
      change.email = external.email;
      change.email_verified = external.emailVerified;
    }
    await eventStore.push({ instanceId, creator: userId }, async (tx) => {
      const user = foldUser(await tx.load(USER, userId));
      if (!user) throw new NotFoundError("user not found");
      return changeUserEvents(user, change);
    });
  }

  /**
   * Signs the user in for the auth request (checking the session of this browser again, or a new one),
   * marking the provider's check, and continues to the completion.
   */
  async function signIn(
    request: FastifyRequest,
    reply: FastifyReply,
    agent: UserAgent,
    authRequest: AuthRequest,
    intent: IdpIntent,
    user: LinkedUser,
  ): Promise<FastifyReply> {
    const instanceId = intent.instanceId;
    const actor = { instanceId, creator: user.id };
    const existing = (await tools.sessionsFor(request, authRequest)).find((s) => s.userId === user.id);
    let sessionId: string;
    try {
      sessionId = existing
        ? (
            await checkSession(
              eventStore,
              actor,
              { sessionId: existing.id, idpId: intent.idpId },
              login.policy,
            )
          ).sessionId
        : (
            await createSession(
              eventStore,
              actor,
              { user, userAgentHash: agent.hash, idpId: intent.idpId },
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
        return failPage(request, reply, 400, message, authRequest);
      }
      throw error;
    }
    await idps.intents.finish(intent);
    await login.authRequests.attachSession(authRequest, sessionId);
    await login.authRequests.setUiState(authRequest, {});
    const next = stepUrl("complete", authRequest.id);
    if (request.method === "POST") return reply.redirect(next, 303);
    // Back from the provider: the browser came here by redirects from the provider's own form post, and
    // browsers apply that page's CSP form-action to every further redirect (to the application). A page
    // that moves on by itself (and a link for browsers that do not) starts a new navigation.
    const context = await tools.pageFor(request, agent, authRequest);
    const { t } = context.translator;
    return sendPage(reply, context, "message", {
      title: t("idp.continueTitle"),
      message: t("idp.continueText"),
      alert: false,
      refreshUrl: next,
      linkUrl: next,
      linkText: t("formPost.submit"),
    });
  }

  /** The new user's values from the identity (username, names, e-mail verified when the provider says so). */
  function newUserEvents(
    orgId: string,
    userId: string,
    idp: LoginIdp,
    external: ExternalIdentity,
    values: Record<string, string>,
    lang: string,
  ) {
    const sameEmail = values.email.toLowerCase() === external.email.toLowerCase();
    return [
      addHumanEvent(userId, orgId, {
        username: values.username,
        profile: {
          given_name: values.givenName,
          family_name: values.familyName,
          display_name:
            values.givenName === external.givenName &&
            values.familyName === external.familyName &&
            external.displayName
              ? external.displayName
              : `${values.givenName} ${values.familyName}`,
          preferred_language: external.preferredLanguage ?? lang,
        },
        email: { address: values.email, is_verified: sameEmail && external.emailVerified },
      }),
      idpLinkAddedEvent(userId, orgId, {
        idp_id: idp.id,
        external_user_id: external.id,
        external_username: external.username,
      }),
    ];
  }

  const valuesOf = (external: ExternalIdentity) => ({
    username: external.username,
    givenName: external.givenName,
    familyName: external.familyName,
    email: external.email,
  });

  /** Creates the user with its link (one append); AlreadyExistsError when the username or identity is taken. */
  async function createLinkedUser(
    request: FastifyRequest,
    authRequest: AuthRequest,
    intent: IdpIntent,
    idp: LoginIdp,
    values: Record<string, string>,
  ): Promise<LinkedUser> {
    const userId = newId();
    const lang = (await login.translatorFor(request, authRequest)).lang;
    await eventStore.push({ instanceId: intent.instanceId, creator: userId }, async (tx) => {
      await holdOrg(tx, intent.instanceId, intent.orgId);
      return newUserEvents(intent.orgId, userId, idp, intent.external!, values, lang);
    });
    return { id: userId, orgId: intent.orgId };
  }

  // ---------------------------------------------------------------------------------------------
  // Start

  ui.get<{ Querystring: Query }>("/login/idp/start", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const instanceId = login.instanceId(request);
    let authRequest: AuthRequest | undefined;
    if (request.query.authRequest) {
      authRequest = await tools.loadRequest(request, reply, agent, request.query.authRequest);
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
    const orgId = await idps.signInOrg(request, authRequest);
    const idp = await idps.active(instanceId, orgId, String(request.query.idp ?? ""));
    if (!idp) return failPage(request, reply, 404, "idp.unavailable", authRequest);
    const id = newIntentId();
    let url: URL;
    try {
      const made = await authorizationRequest(idp, idps.access, redirectUriOf(request), id);
      url = made.url;
      await idps.intents.create({
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
      return failPage(request, reply, 502, "idp.providerError", authRequest, idp.name);
    }
    return reply.redirect(url.href, 302);
  });

  // ---------------------------------------------------------------------------------------------
  // Callback

  ui.get<{ Querystring: Query }>("/login/idp/callback", async (request, reply) => {
    const agent = readUserAgent(request);
    const instanceId = login.instanceId(request);
    const intent = agent
      ? await idps.intents.find(instanceId, String(request.query.state ?? ""), agent.hash)
      : undefined;
    if (!agent || !intent || intent.external)
      return failPage(request, reply, 400, "idp.intentUnknown", undefined);
    const authRequest = await tools.loadRequest(request, reply, agent, intent.authRequestId);
    if (!authRequest) return reply;
    const idp = await idpOf(request, reply, intent, authRequest);
    if (!idp) return reply;
    if (request.query.error) {
      await idps.intents.finish(intent);
      return failPage(request, reply, 400, "idp.denied", authRequest, idp.name);
    }
    let external: ExternalIdentity;
    try {
      const callbackUrl = new URL(redirectUriOf(request));
      callbackUrl.search = new URL(request.url, "http://x").search;
      external = await finishAuthorization(idp, idps.access, callbackUrl, {
        state: intent.id,
        nonce: intent.nonce,
        codeVerifier: intent.codeVerifier,
      });
      if (!external.id) throw new Error("the provider answered no subject");
    } catch (error) {
      request.log.warn({ err: error, idpId: idp.id }, "sign-in with identity provider failed");
      await idps.intents.finish(intent);
      return failPage(request, reply, 502, "idp.providerError", authRequest, idp.name);
    }
    if (!(await idps.intents.setExternal(intent, external)))
      return failPage(request, reply, 400, "idp.intentUnknown", authRequest);

    const linked = await linkedUser(instanceId, idp.id, external.id);
    if (linked) {
      // only users of the requested organization can sign in to it
      if (authRequest.orgId !== undefined && linked.orgId !== authRequest.orgId)
        return failPage(request, reply, 403, "idp.otherOrganization", authRequest);
      if (idp.options.isAutoUpdate) await autoUpdate(instanceId, linked.id, external);
      return signIn(request, reply, agent, authRequest, intent, linked);
    }
    const { options } = idp;
    if (await proposal(instanceId, idp, intent))
      return reply.redirect(intentUrl("link", authRequest, intent), 302);
    if (options.isAutoCreation) {
      const values = valuesOf(external);
      const errors = tools.validateRegistration(values);
      if (Object.keys(errors).length === 0) {
        try {
          const user = await createLinkedUser(request, authRequest, intent, idp, values);
          return signIn(request, reply, agent, authRequest, intent, user);
        } catch (error) {
          if (!(error instanceof AlreadyExistsError)) throw error;
          // e.g. the username is taken: the form lets the person choose another (when allowed)
          if (options.isManualCreationAllowed) {
            await login.authRequests.setUiState(authRequest, {
              page: "idp-register",
              error: "error.formInvalid",
              values,
              fieldErrors: error.message.includes("username") ? { username: "field.usernameTaken" } : {},
            });
            return reply.redirect(intentUrl("register", authRequest, intent), 302);
          }
        }
      } else if (options.isManualCreationAllowed) {
        await login.authRequests.setUiState(authRequest, {
          page: "idp-register",
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
    await idps.intents.finish(intent);
    return failPage(request, reply, 403, "idp.noAccount", authRequest, idp.name);
  });

  // ---------------------------------------------------------------------------------------------
  // Linking to a local account

  ui.get<{ Querystring: Query }>("/login/idp/link", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const found = await intentOf(request, reply, agent, request.query);
    if (!found) return reply;
    const { intent, authRequest, idp } = found;
    const proposed = await proposal(intent.instanceId, idp, intent);
    if (!proposed && !idp.options.isManualLinkingAllowed)
      return failPage(request, reply, 403, "idp.noAccount", authRequest, idp.name);
    const context = await tools.pageFor(request, agent, authRequest);
    const { t } = context.translator;
    const state = authRequest.uiState.page === "idp-link" ? authRequest.uiState : {};
    return sendPage(reply, context, "idp-link", {
      title: t("idp.linkTitle"),
      intro: t(proposed ? "idp.linkProposal" : "idp.linkIntro", {
        provider: idp.name,
        instance: context.instanceName,
      }),
      error: state.error,
      intentId: intent.id,
      account: proposed
        ? {
            sessionId: "",
            displayName: proposed.displayName,
            loginName: proposed.loginName,
            initials: initials(proposed.displayName || proposed.loginName),
          }
        : undefined,
      loginName: state.values?.loginName ?? "",
      registerUrl: idp.options.isManualCreationAllowed
        ? intentUrl("register", authRequest, intent)
        : undefined,
      cancelUrl: stepUrl("loginname", authRequest.id),
    });
  });

  ui.post("/login/idp/link", async (request, reply) => {
    const agent = await tools.checkForm(request, reply);
    if (!agent) return reply;
    const body = request.body as Body;
    const found = await intentOf(request, reply, agent, {
      authRequest: field(body, "authRequest"),
      intent: field(body, "intent"),
    });
    if (!found) return reply;
    const { intent, authRequest, idp } = found;
    const instanceId = intent.instanceId;
    const proposed = await proposal(instanceId, idp, intent);
    if (!proposed && !idp.options.isManualLinkingAllowed)
      return reply.redirect(intentUrl("link", authRequest, intent), 303);
    const loginName = proposed?.loginName ?? field(body, "loginName").slice(0, 400);
    const fail = async (error: string) => {
      await login.authRequests.setUiState(authRequest, { page: "idp-link", error, values: { loginName } });
      return reply.redirect(intentUrl("link", authRequest, intent), 303);
    };
    if (!loginName) return fail("error.loginNameRequired");
    const tooMany = await tools.limitPassword(request, reply, authRequest, loginName);
    if (tooMany) return tooMany;
    const password = field(body, "password", { raw: true });
    if (!password) return fail("error.passwordRequired");

    let user: LinkedUser | undefined;
    if (proposed) user = { id: proposed.userId, orgId: intent.orgId };
    else {
      try {
        user = await findUser(db, instanceId, { loginName });
      } catch (error) {
        if (!(error instanceof NotFoundError)) throw error;
      }
      // only users of the organization the provider signs in to
      if (user && user.orgId !== intent.orgId) user = undefined;
    }
    // the same answer for every failure as on the password page (../password.ts)
    const existing = user
      ? (await tools.sessionsFor(request, authRequest)).find((s) => s.userId === user.id)
      : undefined;
    const sessionId = await checkPasswordForSignIn(login, {
      instanceId,
      user,
      password,
      sessionId: existing?.id,
      userAgentHash: agent.hash,
    });
    if (!user || !sessionId) return fail("error.invalidCredentials");
    const actor = { instanceId, creator: user.id };
    const external = intent.external!;
    try {
      await eventStore.push(actor, async (tx) => {
        const current = foldUser(await tx.load(USER, user.id));
        if (!current) throw new NotFoundError("user not found");
        return addIdpLinkEvents(current, {
          idp_id: idp.id,
          external_user_id: external.id,
          external_username: external.username,
        });
      });
    } catch (error) {
      if (error instanceof AlreadyExistsError || error instanceof FailedPreconditionError)
        return fail("idp.alreadyLinked");
      throw error;
    }
    if (idp.options.isAutoUpdate) await autoUpdate(instanceId, user.id, external);
    await idps.intents.finish(intent);
    await login.authRequests.attachSession(authRequest, sessionId);
    await login.authRequests.setUiState(authRequest, {});
    return reply.redirect(stepUrl("complete", authRequest.id), 303);
  });

  // ---------------------------------------------------------------------------------------------
  // Registration with the provider's values

  ui.get<{ Querystring: Query }>("/login/idp/register", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const found = await intentOf(request, reply, agent, request.query);
    if (!found) return reply;
    const { intent, authRequest, idp } = found;
    if (!idp.options.isManualCreationAllowed)
      return tools.sendMessage(request, reply, {
        status: 403,
        title: "register.title",
        message: "error.registrationDisabled",
        link: back(authRequest),
        authRequest,
      });
    const context = await tools.pageFor(request, agent, authRequest);
    const { t } = context.translator;
    const state: UiState =
      authRequest.uiState.page === "idp-register"
        ? authRequest.uiState
        : { values: valuesOf(intent.external!) };
    const readOnly = idp.options.isAutoCreation ? readOnlyFields(state.fieldErrors) : [];
    return sendPage(reply, context, "idp-register", {
      title: t("register.title"),
      intro: t("idp.registerIntro", { provider: idp.name, instance: context.instanceName }),
      error: state.error,
      intentId: intent.id,
      fields: tools.registerFields(t, state, { withPassword: false, readOnly }),
      linkUrl: idp.options.isManualLinkingAllowed ? intentUrl("link", authRequest, intent) : undefined,
      cancelUrl: stepUrl("loginname", authRequest.id),
    });
  });

  ui.post("/login/idp/register", async (request, reply) => {
    const agent = await tools.checkForm(request, reply);
    if (!agent) return reply;
    const body = request.body as Body;
    const found = await intentOf(request, reply, agent, {
      authRequest: field(body, "authRequest"),
      intent: field(body, "intent"),
    });
    if (!found) return reply;
    const { intent, authRequest, idp } = found;
    if (!idp.options.isManualCreationAllowed)
      return reply.redirect(intentUrl("register", authRequest, intent), 303);
    const external = intent.external!;
    const previous =
      authRequest.uiState.page === "idp-register" ? authRequest.uiState.fieldErrors : undefined;
    // read-only fields keep the provider's values whatever was posted
    const readOnly = idp.options.isAutoCreation ? readOnlyFields(previous) : [];
    const posted: Record<string, string> = {
      username: field(body, "username"),
      givenName: field(body, "givenName"),
      familyName: field(body, "familyName"),
      email: field(body, "email"),
    };
    const fromProvider = valuesOf(external) as Record<string, string>;
    const values = Object.fromEntries(
      Object.entries(posted).map(([name, value]) => [
        name,
        readOnly.includes(name) ? fromProvider[name] : value,
      ]),
    );
    const retry = async (fieldErrors: Record<string, string>) => {
      await login.authRequests.setUiState(authRequest, {
        page: "idp-register",
        error: "error.formInvalid",
        values,
        fieldErrors,
      });
      return reply.redirect(intentUrl("register", authRequest, intent), 303);
    };
    const errors = tools.validateRegistration(values);
    if (Object.keys(errors).length) return retry(errors);
    let user: LinkedUser;
    try {
      user = await createLinkedUser(request, authRequest, intent, idp, values);
    } catch (error) {
      if (error instanceof AlreadyExistsError) {
        if (error.message.includes("username")) return retry({ username: "field.usernameTaken" });
        return failPage(request, reply, 409, "idp.alreadyLinked", authRequest);
      }
      throw error;
    }
    return signIn(request, reply, agent, authRequest, intent, user);
  });
}

/**
 * The fields the person may not change while auto creation is on: all the provider answered, except one
 * the provider's value failed for (e.g. a username taken), which the person must choose.
 */
function readOnlyFields(fieldErrors: Record<string, string> | undefined): string[] {
  return ["username", "givenName", "familyName", "email"].filter((name) => !fieldErrors?.[name]);
}
