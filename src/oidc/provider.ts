import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { TokenVerifier } from "../auth/authenticate.ts";
import { Authorizer } from "../auth/authorize.ts";
import type { Config } from "../config.ts";
import { INSTANCE } from "../domain/instance/events.ts";
import { SETTINGS } from "../domain/settings/events.ts";
import { WEB_KEY } from "../domain/web-key/events.ts";
import { DatabaseFullError } from "../errors.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import type { ExecutionEngine } from "../execution/engine.ts";
import type { AuthRequestCompleter, Login } from "../login/index.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { FeatureGate } from "../query/features.ts";
import type { InstanceDirectory } from "../query/instances.ts";
import { isConnectionFailure } from "../storage/availability.ts";
import type { Database } from "../storage/database.ts";
import { accessTokenVerifier } from "./api-verifier.ts";
import { registerBrowserEndpoints } from "./browser.ts";
import { ClientRegistry } from "./clients.ts";
import { type AuthorizationCodeRequest, issueAuthorizationCode } from "./codes.ts";
import { oidcCompleter } from "./complete.ts";
import { defaultLifetimes, type OidcContext, type RequestInfo, requestInfo } from "./context.ts";
import { discoveryDocument } from "./endpoints/discovery.ts";
import { introspectionEndpoint } from "./endpoints/introspection.ts";
import { revocationEndpoint } from "./endpoints/revocation.ts";
import { MULTI_VALUED_TOKEN_PARAMS, tokenEndpoint } from "./endpoints/token.ts";
import { bearerToken, userinfoEndpoint } from "./endpoints/userinfo.ts";
import { InvalidRequest, OAuthError, ServerError, TemporarilyUnavailable } from "./errors.ts";
import { formParams, parseParams, sendNoStore, sendOAuthError } from "./http.ts";
import { OidcPath } from "./issuer.ts";
import { SigningKeys } from "./keys.ts";
import { ProjectAudiences } from "./project-audiences.ts";
import { endTokensWithSessions } from "./session-tokens.ts";
import { TokenStore } from "./token-store.ts";
import { userGrantsFromReadModel } from "./user-grants.ts";

export interface OidcProviderDeps {
  config: Config;
  db: Database;
  eventStore: EventStore;
  instances: InstanceDirectory;
  features: FeatureGate;
  /** PLATFORM_MASTERKEY (see `resolveMasterKey`). */
  masterKey: Buffer;
  /** The API's authorizer (shares its membership cache); a new one when not given. */
  authorizer?: Authorizer;
  /** Runs the function conditions `preuserinfo` and `preaccesstoken` (src/execution). */
  executions?: ExecutionEngine;
  /** The signing keys (shared with the web keys API); new ones when not given. */
  keys?: SigningKeys;
  /** Counts the tokens issued by grant (src/metrics). */
  metrics?: Metrics;
}

/** The OpenID Connect provider of every instance: its state, endpoints and API token verifier. */
export interface OidcProvider extends OidcContext {
  /** A single-use code for an authenticated user (what the authorization endpoint issues; for tests). */
  issueAuthorizationCode(request: AuthorizationCodeRequest): Promise<string>;
  /** Accepts this provider's access tokens at the management APIs (`Authenticator.addVerifier`). */
  apiVerifier: TokenVerifier;
  /** Registers the OIDC endpoints that browsers do not open (JSON answers) on the app. */
  register(app: FastifyInstance): void;
  /** The login UI's hand-off: issues the code or implicit tokens of an authenticated auth request. */
  completer: AuthRequestCompleter;
  /** Registers the authorization and end-session endpoints; after the login UI, whose pages they use. */
  registerBrowserEndpoints(app: FastifyInstance, login: Login): void;
}

/** How long a discovery document is reused (its feature flags and languages may change). */
const DISCOVERY_CACHE_MS = 5_000;
/** Expired tokens, codes, assertions and keys are deleted this often. */
const SWEEP_INTERVAL_MS = 15 * 60_000;

export function createOidcProvider(deps: OidcProviderDeps): OidcProvider {
  const tokens = new TokenStore(deps.db, deps.eventStore.broadcast);
  endTokensWithSessions(deps.eventStore, tokens);
  // Clients: OIDC and API apps, then machine users (clients.ts).
  const clients = new ClientRegistry(deps.db, deps.eventStore);
  const ctx: OidcContext = {
    config: deps.config,
    db: deps.db,
    instances: deps.instances,
    features: deps.features,
    keys: deps.keys ?? new SigningKeys(deps.db, deps.masterKey, deps.eventStore),
    clients,
    tokens,
    userGrants: userGrantsFromReadModel(deps.db),
    projectAudiences: new ProjectAudiences(deps.db, deps.eventStore),
    lifetimes: { ...defaultLifetimes },
    eventStore: deps.eventStore,
    authorizer: deps.authorizer ?? new Authorizer(deps.db, deps.eventStore),
    executions: deps.executions,
    metrics: deps.metrics,
  };

  const discoveryCache = new Map<string, { body: Buffer; until: number }>();
  deps.eventStore.onCommitted((events) => {
    // discovery lists the algorithms of the published keys
    if (events.some((e) => [SETTINGS, INSTANCE, WEB_KEY].includes(e.aggregateType))) discoveryCache.clear();
  });
  deps.eventStore.onStale(() => discoveryCache.clear());

  const provider: OidcProvider = Object.assign(ctx, {
    issueAuthorizationCode: (request: AuthorizationCodeRequest) => issueAuthorizationCode(ctx, request),
    apiVerifier: accessTokenVerifier(ctx, deps.eventStore),
    completer: oidcCompleter(ctx),
    registerBrowserEndpoints: (app: FastifyInstance, login: Login) =>
      registerBrowserEndpoints(app, ctx, login),
    register(app: FastifyInstance) {
      app.register(async (scope) => routes(scope, ctx, discoveryCache));
      const sweeper = setInterval(() => {
        tokens.sweep().catch((error) => app.log.warn({ err: error }, "oidc: sweeping expired tokens failed"));
      }, SWEEP_INTERVAL_MS);
      sweeper.unref();
      app.addHook("onClose", async () => clearInterval(sweeper));
    },
  });
  return provider;
}

/** The endpoints, in their own Fastify scope: form bodies parsed here only, OAuth-style errors. */
async function routes(
  app: FastifyInstance,
  ctx: OidcContext,
  discoveryCache: Map<string, { body: Buffer; until: number }>,
): Promise<void> {
  // Bodies arrive raw: form parameters are parsed by formParams (which refuses repeats and other types).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "string" }, (_request, body, done) => done(null, body));

  // Browser clients on other origins (single-page apps) may call these endpoints and read their answers,
  // errors included; no cookies are involved.
  app.addHook("onRequest", (_request, reply, done) => {
    reply.header("access-control-allow-origin", "*");
    done();
  });

  app.setErrorHandler((error, request, reply) => {
    if (error instanceof OAuthError) return sendOAuthError(reply, error, "platform");
    const status = (error as { statusCode?: number }).statusCode;
    if (status && status >= 400 && status < 500) {
      // Body too large (413), unreadable body: a malformed request.
      return sendOAuthError(reply, new InvalidRequest((error as Error).message), "platform").code(
        status === 413 ? 413 : 400,
      );
    }
    if (isConnectionFailure(error)) {
      request.log.error({ err: error }, "oidc request failed: database unavailable");
      return sendOAuthError(reply.header("retry-after", "5"), new TemporarilyUnavailable(), "platform");
    }
    if (error instanceof DatabaseFullError) {
      request.log.error({ err: error }, "oidc request failed: database disk full");
      return sendOAuthError(
        reply.header("retry-after", "5"),
        new TemporarilyUnavailable("the server cannot store anything right now (disk full); retry later"),
        "platform",
      );
    }
    request.log.error({ err: error }, "oidc request failed");
    return sendOAuthError(reply, new ServerError(), "platform");
  });

  const info = (request: FastifyRequest): Promise<RequestInfo> => requestInfo(ctx, request);
  const url = (i: RequestInfo, path: string) => i.issuer + path;

  app.get(OidcPath.discovery, async (request, reply) => {
    const i = await info(request);
    const key = `${i.instance.id} ${i.issuer}`;
    let cached = discoveryCache.get(key);
    if (!cached || cached.until <= Date.now()) {
      cached = {
        body: Buffer.from(JSON.stringify(await discoveryDocument(ctx, i))),
        until: Date.now() + DISCOVERY_CACHE_MS,
      };
      discoveryCache.set(key, cached);
    }
    return reply
      .header("cache-control", "public, max-age=300")
      .type("application/json; charset=utf-8")
      .send(cached.body);
  });

  app.get(OidcPath.keys, async (request, reply) => {
    const instanceId = request.scope.instanceId!;
    const jwks = ctx.keys.cachedJwks(instanceId) ?? (await ctx.keys.jwks(instanceId));
    // Shorter than the time a new key is published before it signs (keys.ts prepublishMs, 1 h).
    return reply
      .header("cache-control", "public, max-age=300")
      .type("application/jwk-set+json; charset=utf-8")
      .send(jwks);
  });

  app.post(OidcPath.token, async (request, reply) => {
    const i = await info(request);
    const response = await tokenEndpoint(
      ctx,
      i,
      formParams(request, MULTI_VALUED_TOKEN_PARAMS),
      request.headers.authorization,
      url(i, OidcPath.token),
    );
    return sendNoStore(reply, response);
  });

  app.post(OidcPath.introspect, async (request, reply) => {
    const i = await info(request);
    const response = await introspectionEndpoint(
      ctx,
      i,
      formParams(request),
      request.headers.authorization,
      url(i, OidcPath.introspect),
    );
    return sendNoStore(reply, response);
  });

  const userinfo = async (request: FastifyRequest, reply: FastifyReply) => {
    const i = await info(request);
    const hasBody = request.method === "POST" && typeof request.body === "string" && request.body.length > 0;
    const params = hasBody ? formParams(request) : parseParams("");
    return sendNoStore(
      reply,
      await userinfoEndpoint(ctx, i, bearerToken(request.headers.authorization, params)),
    );
  };
  app.get(OidcPath.userinfo, userinfo);
  app.post(OidcPath.userinfo, userinfo);

  app.post(OidcPath.revoke, async (request, reply) => {
    const i = await info(request);
    await revocationEndpoint(
      ctx,
      i,
      formParams(request),
      request.headers.authorization,
      url(i, OidcPath.revoke),
    );
    return reply.code(200).header("cache-control", "no-store").send();
  });

  // CORS preflight of browser clients (bearer and Basic headers are not CORS-safelisted).
  for (const path of [
    OidcPath.discovery,
    OidcPath.keys,
    OidcPath.token,
    OidcPath.userinfo,
    OidcPath.revoke,
  ]) {
    app.options(path, async (_request, reply) =>
      reply
        .code(204)
        .header("access-control-allow-methods", "GET, POST, OPTIONS")
        .header("access-control-allow-headers", "authorization, content-type")
        .header("access-control-max-age", "600")
        .send(),
    );
  }
}
