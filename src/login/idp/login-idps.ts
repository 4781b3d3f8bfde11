/**
 * The login UI's external identity providers: which ones the login-name page offers (cached per
 * organization), whether one is active, the sign-in intents, and the requests to providers. The steps of a
 * sign-in with a provider are ../steps/idp/; docs/identity-providers.md.
 */
import type { FastifyRequest } from "fastify";
import { IDP } from "../../domain/idp/events.ts";
import { INSTANCE } from "../../domain/instance/events.ts";
import { ORG } from "../../domain/org/events.ts";
import { PROJECT } from "../../domain/project/events.ts";
import { fetchThrough, HttpCaller } from "../../net/http.ts";
import type { OutboundLevel } from "../../net/outbound.ts";
import { appByClientId } from "../../query/apps.ts";
import { activeIdpForOrg, activeIdpsForOrg, type LoginIdp } from "../../query/idps.ts";
import type { AuthRequest } from "../auth-requests.ts";
import type { Login } from "../login.ts";
import { IdpIntentStore } from "./intents.ts";
import type { ProviderAccess } from "./provider.ts";

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

/** The start step's URL for a provider (../steps/idp/start.ts). */
export function startUrl(idpId: string, authRequestId?: string): string {
  const query = new URLSearchParams({ idp: idpId });
  if (authRequestId) query.set("authRequest", authRequestId);
  return `/ui/login/idp/start?${query}`;
}
