/**
 * The login UI's services for its steps (./steps/) and for the OIDC protocol side: the auth request
 * store, the browser's sessions, the choice of a session for an auth request, sign-out, and sending a
 * completer's answer (redirect or form_post page) to the browser. The pages' language, texts and branding
 * come from ./page-contexts.ts.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Config } from "../config.ts";
import { hashPassword, verifyPassword } from "../crypto/password.ts";
import { randomToken } from "../crypto/tokens.ts";
import { type PasswordPolicy, passwordPolicyOf, terminateSession } from "../domain/session/commands.ts";
import {
  LOGIN,
  type LoginFlag,
  type LoginSettings,
  loginDefaults,
  loginPolicyOf,
} from "../domain/settings/login.ts";
import { NotFoundError } from "../errors.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import type { OutboundPolicy } from "../net/outbound.ts";
import type { NotificationDelivery } from "../notifications/delivery.ts";
import type { InstanceDirectory, InstanceInfo } from "../query/instances.ts";
import { resolveSetting } from "../query/settings.ts";
import type { Database } from "../storage/database.ts";
import { type AuthRequest, AuthRequestStore } from "./auth-requests.ts";
import type { PageBranding } from "./branding.ts";
import { type AuthRequestCompleter, type ClientResponse, unavailableCompleter } from "./completer.ts";
import type { Translator } from "./i18n.ts";
import { ClientLabelingCache, messageLabelOrg } from "./labeling.ts";
import { PageContexts } from "./page-contexts.ts";
import { PolicyOrgCache } from "./policy-org-cache.ts";
import { type PageContext, sendFormPost, sendPage } from "./render.ts";
import {
  type LoginSession,
  nextStep,
  pendingStep,
  type SessionSelection,
  selectionFor,
  sessionsNow,
  sessionsOfUserAgentHash,
} from "./sessions.ts";
import { SettingsLayerCache } from "./settings-cache.ts";
import {
  clearUserAgent,
  ensureUserAgent,
  isNewUserAgent,
  readUserAgent,
  setUserAgent,
  type UserAgent,
} from "./user-agent.ts";
import { moveUserAgent } from "./user-agent-renewal.ts";

/**
 * The account page's own sign-in as `pendingStep` sees it: no prompt, no max_age, begun before any check
 * (so a check's lifetime does not end the account page's session; the session's end does).
 */
const ACCOUNT_SIGN_IN = {
  createdAt: new Date(0),
  prompt: [],
  maxAge: undefined,
  acrValues: [],
} as unknown as AuthRequest;

export interface LoginDeps {
  config: Config;
  db: Database;
  eventStore: EventStore;
  instances: InstanceDirectory;
  /** Decrypts identity providers' client secrets (login with external providers; none without it). */
  masterKey?: Buffer;
  /** Where requests to identity providers may go (src/net/outbound.ts). */
  outbound: OutboundPolicy;
  /** The notification outbox: the codes of the reset, verification and invitation pages are queued here. */
  messages?: NotificationDelivery;
}

export interface LoginOptions {
  /** The protocol side's hand-off (the platform passes the OIDC provider's; default: `unavailableCompleter`). */
  completer?: AuthRequestCompleter;
}

/** A session of a browser: its ID and its user. */
export interface BrowserSession {
  sessionId: string;
  userId: string;
}

/** The page the browser sees after sign-out (end_session may send it there). */
export const SIGNED_OUT_URL = "/ui/login/signedout";

export class Login {
  readonly authRequests: AuthRequestStore;
  completer: AuthRequestCompleter;
  private dummyHash?: Promise<string>;
  /** The language, login, text and branding settings the pages read (cached, invalidated by settings events). */
  private readonly settings: SettingsLayerCache;
  /** The language, texts and branding of pages (./page-contexts.ts). */
  private readonly pages: PageContexts;
  /** Whose login policy governs each user (its organization's or the instance's), cached per user. */
  private readonly policyOrgs: PolicyOrgCache;
  /** The `private_labeling_setting` and organization of each application's project (./labeling.ts). */
  private readonly labeling: ClientLabelingCache;

  constructor(
    readonly deps: LoginDeps,
    options: LoginOptions = {},
  ) {
    this.authRequests = new AuthRequestStore(deps.db);
    this.settings = new SettingsLayerCache(deps.db, deps.eventStore);
    this.policyOrgs = new PolicyOrgCache(deps.db, deps.eventStore);
    this.labeling = new ClientLabelingCache(deps.db, deps.eventStore);
    this.pages = new PageContexts(
      this.settings,
      {
        instanceId: (request) => this.instanceId(request),
        instance: (request) => this.instance(request),
      },
      this.labeling,
    );
    this.completer = options.completer ?? unavailableCompleter;
  }

  get policy(): PasswordPolicy {
    return passwordPolicyOf(this.deps.config);
  }

  /** The instance of the request (the server resolved it from the Host header). */
  instanceId(request: FastifyRequest): string {
    const id = request.scope.instanceId;
    if (!id) throw new NotFoundError("instance not found");
    return id;
  }

  async instance(request: FastifyRequest): Promise<InstanceInfo> {
    const info =
      (await this.deps.instances.byHost(request.scope.host)) ??
      (await this.deps.instances.byId(this.instanceId(request)));
    if (!info) throw new NotFoundError("instance not found");
    return info;
  }

  /** The browser's user agent, setting the `platform_ua` cookie when it has none. */
  userAgent(request: FastifyRequest, reply: FastifyReply): UserAgent {
    return ensureUserAgent(request, reply, this.deps.config.externalSecure);
  }

  /**
   * After a sign-in on the browser of `request` (a session created or authenticated with `fresh.hash`):
   * `fresh` becomes the browser's `platform_ua` cookie, and everything bound to its old value moves to the
   * new one in one transaction: its sessions (`session.user_agent.changed`), its auth requests and its
   * sign-ins at identity providers in progress (`authRequest`, held by the caller, too). So a value planted
   * in the browser, or learned, before the sign-in names nothing afterwards (no session fixation), while
   * the person stays signed in with every account of the browser and its sign-in goes on.
   */
  async adoptUserAgent(
    request: FastifyRequest,
    reply: FastifyReply,
    fresh: UserAgent,
    authRequest?: AuthRequest,
  ): Promise<void> {
    const old = readUserAgent(request);
    const instanceId = this.instanceId(request);
    if (old && old.hash !== fresh.hash)
      await moveUserAgent(this.deps.eventStore, instanceId, old.hash, fresh.hash);
    if (authRequest?.userAgentHash === old?.hash) authRequest!.userAgentHash = fresh.hash;
    setUserAgent(request, reply, fresh, this.deps.config.externalSecure);
  }

  /** The live sessions the browser of `request` signed in with (active human users), most recent first. */
  async sessionsOfUserAgent(request: FastifyRequest): Promise<LoginSession[]> {
    const agent = readUserAgent(request);
    // a browser whose cookie this request made has no sessions: no query
    if (!agent || isNewUserAgent(request)) return [];
    return sessionsOfUserAgentHash(this.deps.db, this.instanceId(request), agent.hash);
  }

  /**
   * The browser's sessions signed in to the account page: those a sign-in to it would use without a
   * further step of the login policy of the user's organization. A session still waiting for its second
   * factor (or for the registration of one the policy forces) is not: else a password alone, stopped at
   * the second-factor page, would reach the account by going to `/`. Any second factor the session passed
   * counts, however long ago (the account page is the session's own); a factor the user added after the
   * session began (on its account page) is not asked for.
   */
  async accountSessionsOfUserAgent(request: FastifyRequest): Promise<LoginSession[]> {
    const sessions = await this.sessionsOfUserAgent(request);
    if (sessions.length === 0) return sessions;
    const now = await sessionsNow(this.deps.db, sessions);
    const instanceId = this.instanceId(request);
    const signedIn: LoginSession[] = [];
    for (const session of sessions) {
      const policy = await this.userLoginPolicy(instanceId, session);
      const asBegun = { ...session, factors: session.priorFactors };
      const pending = pendingStep(ACCOUNT_SIGN_IN, asBegun, now, policy);
      if (pending !== "mfa" && !(pending === "mfa-setup" && policy.force_mfa)) signedIn.push(session);
    }
    return signedIn;
  }

  /** Whether people may register in the organization (or the instance's default organization). */
  async allowRegister(instanceId: string, orgId: string | undefined): Promise<boolean> {
    return this.loginFlag(instanceId, orgId, "allow_register");
  }

  /**
   * A boolean login setting in force for the organization of a sign-in (else the instance), inherited
   * system → instance → organization (src/domain/settings/login.ts).
   */
  async loginFlag(instanceId: string, orgId: string | undefined, name: LoginFlag): Promise<boolean> {
    return (await this.loginPolicy(instanceId, orgId))[name] === true;
  }

  /**
   * The login policy in force for the organization of a sign-in (else the instance), inherited system →
   * instance → organization (src/domain/settings/login.ts); cached until the login settings change. For
   * what a page decides before the user is known; once it is, `userLoginPolicy`.
   */
  async loginPolicy(instanceId: string, orgId: string | undefined): Promise<LoginSettings> {
    const context = orgId
      ? { type: "org" as const, instanceId, orgId }
      : { type: "instance" as const, instanceId };
    const owner = orgId ? { type: 3 as const, id: orgId } : { type: 2 as const, id: instanceId };
    return this.settings.derived(LOGIN, context, (layers) =>
      loginPolicyOf((name) => resolveSetting(layers, name, owner, loginDefaults[name]).value),
    );
  }

  /**
   * The login policy a user signs in under once it is known (docs/factors.md, "Accounts above their
   * organization"): its organization's (the organization an auth request names is the user's: only its
   * users sign in to it), or the instance's when the user holds roles its organization's owners do not
   * (`policyOrgOf`). Every decision about a known user's sign-in reads this one, never `loginPolicy`.
   */
  async userLoginPolicy(instanceId: string, user: { userId: string; orgId: string }): Promise<LoginSettings> {
    const orgId = await this.policyOrgs.orgOf(instanceId, { userId: user.userId, orgId: user.orgId });
    return this.loginPolicy(instanceId, orgId);
  }

  /** The login policy of each session's sign-in, for `nextStep`: that of the session's user. */
  async policiesFor(
    instanceId: string,
    sessions: readonly LoginSession[],
  ): Promise<(session: LoginSession) => LoginSettings> {
    const policies = new Map(
      await Promise.all(
        sessions.map(
          async (session) => [session.id, await this.userLoginPolicy(instanceId, session)] as const,
        ),
      ),
    );
    return (session) => policies.get(session.id) ?? loginDefaults;
  }

  /** The branding of the organization's pages (or the instance's), cached until the settings change. */
  branding(instanceId: string, orgId: string | undefined): Promise<PageBranding> {
    return this.pages.branding(instanceId, orgId);
  }

  /**
   * The organization whose branding and texts the messages a sign-in sends (codes by e-mail and SMS, the
   * password reset, the verification of a registration) take instead of their recipient's: the project's
   * under ENFORCE_PROJECT_RESOURCE_OWNER_POLICY (./labeling.ts); undefined otherwise and without an auth
   * request of an application.
   */
  async messageLabelOrg(authRequest: AuthRequest | undefined): Promise<string | undefined> {
    if (!authRequest?.clientId || authRequest.orgId) return undefined;
    return messageLabelOrg(
      authRequest.orgId,
      await this.labeling.of(authRequest.instanceId, authRequest.clientId),
    );
  }

  /**
   * The session an auth request can use without asking the person (`prompt=none`, or the protocol side
   * deciding before it sends the browser to the UI): `session`, or `login_required` /
   * `interaction_required`.
   */
  async selectSessionFor(request: FastifyRequest, authRequest: AuthRequest): Promise<SessionSelection> {
    const sessions = await this.sessionsOfUserAgent(request);
    // prompt=none never shows the registration form, whatever the settings
    const step = nextStep(authRequest, sessions, {
      allowRegister: false,
      // the clock matters only for sessions' check times (max_age, the policy's lifetimes)
      now: sessions.length ? await sessionsNow(this.deps.db, sessions) : new Date(),
      policyOf: await this.policiesFor(this.instanceId(request), sessions),
    });
    return selectionFor(step);
  }

  /**
   * Every session of the browser of `request`, also those of users locked or deactivated since (what
   * sign-out ends), unordered. `sessionsOfUserAgent` answers the usable ones with their accounts.
   */
  async browserSessions(request: FastifyRequest): Promise<BrowserSession[]> {
    const agent = readUserAgent(request);
    if (!agent) return [];
    const rows = await this.deps.db.query<{ id: string; user_id: string }>(
      "SELECT id, user_id FROM sessions WHERE instance_id = $1 AND user_agent_hash = $2",
      [this.instanceId(request), agent.hash],
    );
    return rows.map((row) => ({ sessionId: row.id, userId: row.user_id }));
  }

  /**
   * Ends the browser's sessions (all, or those of `sessionIds` among them) through the sessions domain;
   * ending all clears the cookie too. Answers the sessions ended (e.g. to revoke their tokens).
   */
  async endBrowserSessions(
    request: FastifyRequest,
    reply: FastifyReply,
    options: { sessionIds?: string[] } = {},
  ): Promise<BrowserSession[]> {
    if (!readUserAgent(request)) return [];
    const instanceId = this.instanceId(request);
    const ended: BrowserSession[] = [];
    for (const session of await this.browserSessions(request)) {
      if (options.sessionIds && !options.sessionIds.includes(session.sessionId)) continue;
      try {
        await terminateSession(
          this.deps.eventStore,
          { instanceId, creator: session.userId },
          { sessionId: session.sessionId },
        );
        ended.push(session);
      } catch (error) {
        if (!(error instanceof NotFoundError)) throw error; // ended meanwhile
      }
    }
    if (!options.sessionIds) clearUserAgent(request, reply, this.deps.config.externalSecure);
    return ended;
  }

  /**
   * The language and texts for a request (the picked language, ui_locales of the auth request or
   * `uiLocales` of a request not stored, Accept-Language, default), with the texts administrators set
   * for the sign-in's organization (the auth request's), else the instance.
   */
  translatorFor(
    request: FastifyRequest,
    authRequest?: AuthRequest,
    uiLocales?: string[],
  ): Promise<Translator> {
    return this.pages.translatorFor(request, authRequest, uiLocales);
  }

  /**
   * What every page needs (./page-contexts.ts). Its branding and texts are the sign-in's organization's
   * (the auth request's), else as the `private_labeling_setting` of its application's project says
   * (./labeling.ts) with `userOrgId` (the organization of the user the page is for, once known): by
   * default the user's once known, else the instance's.
   */
  pageContext(
    request: FastifyRequest,
    options: { authRequest?: AuthRequest; csrf?: string; uiLocales?: string[]; userOrgId?: string } = {},
  ): Promise<PageContext> {
    return this.pages.pageContext(request, options);
  }

  /** The languages the instance allows (the account page's choice of a preferred language). */
  allowedLanguages(request: FastifyRequest): Promise<readonly string[]> {
    return this.pages.allowedLanguages(request);
  }

  /**
   * Sends a completer's answer: a redirect (303 after a POST, else 302) or the form_post page in the
   * request's language. For the protocol side's own answers too (e.g. errors in form_post mode).
   */
  async sendClientResponse(
    request: FastifyRequest,
    reply: FastifyReply,
    response: ClientResponse,
    authRequest?: AuthRequest,
  ): Promise<FastifyReply> {
    if (response.kind === "redirect")
      return reply.redirect(response.url, request.method === "POST" ? 303 : 302);
    const context = await this.pageContext(request, { authRequest });
    return sendFormPost(reply, context, response.action, response.fields);
  }

  /**
   * The page for a sign-in or sign-out request the protocol side cannot answer at the client (unknown
   * client, unusable redirect URI, an invalid end-session request): localized (`uiLocales`, then
   * Accept-Language), never a redirect. It names the OAuth error for the application's developer.
   */
  async sendProtocolError(
    request: FastifyRequest,
    reply: FastifyReply,
    options: {
      /** A bad sign-in request, a bad sign-out request, or a failure on our side. */
      kind: "signin" | "signout" | "server";
      error: string;
      description: string;
      uiLocales?: string[];
      status?: number;
    },
  ): Promise<FastifyReply> {
    const context = await this.pageContext(request, { uiLocales: options.uiLocales });
    const { t } = context.translator;
    const signout = options.kind === "signout";
    return sendPage(
      reply,
      context,
      "templates/message",
      {
        title: t(signout ? "error.signOutTitle" : "error.title"),
        message: t(
          options.kind === "server"
            ? "error.server"
            : signout
              ? "error.signOutRequest"
              : "error.clientRequest",
        ),
        alert: true,
        detail: { error: options.error, description: options.description },
        detailLabel: t("error.detail"),
        linkUrl: "/",
        linkText: t("error.toAccount"),
      },
      { status: options.status ?? 400 },
    );
  }

  /** Burns the time of one password verification (unknown login names answer as slowly as wrong passwords). */
  async verifyDummyPassword(password: string): Promise<void> {
    this.dummyHash ??= hashPassword(randomToken());
    await verifyPassword(await this.dummyHash, password);
  }
}
