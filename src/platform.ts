import type { ContextValues } from "@connectrpc/connect";
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import type { DestinationStream } from "pino";
import { idempotencyInterceptor } from "./api/idempotency.ts";
import { registerDocs } from "./api/openapi/plugin.ts";
import { registerReflection } from "./api/reflection.ts";
import { registerApi } from "./api/register.ts";
import { Authenticator } from "./auth/authenticate.ts";
import { Authorizer } from "./auth/authorize.ts";
import { type BootstrapResult, bootstrap, ensureConsoleApps } from "./bootstrap.ts";
import { type AdminSocket, listenAdminSocket } from "./cli/admin-socket.ts";
import { issueAdminToken } from "./cli/admin-token.ts";
import { type Config, resolveMasterKey } from "./config.ts";
import { INSTANCE } from "./domain/instance/events.ts";
import { CACHE_CHANNEL } from "./eventstore/broadcast.ts";
import { EventStore } from "./eventstore/eventstore.ts";
import { createExecutions, type Executions } from "./execution/index.ts";
import { type AuthRequestCompleter, type Login, registerLogin } from "./login/index.ts";
import { listenForMetrics, type MetricsListener, metricsOnMainPort } from "./metrics/endpoint.ts";
import { Metrics } from "./metrics/metrics.ts";
import { OutboundPolicy, type Resolve } from "./net/outbound.ts";
import { createNotificationDelivery, type NotificationDelivery } from "./notifications/delivery.ts";
import { NotificationSender } from "./notifications/sender.ts";
import { SigningKeys } from "./oidc/keys.ts";
import { createOidcProvider, type OidcProvider } from "./oidc/provider.ts";
import type { StopCounts } from "./outbox/worker.ts";
import { FeatureGate } from "./query/features.ts";
import { InstanceDirectory } from "./query/instances.ts";
import { projections } from "./query/projections/index.ts";
import { registerConsole } from "./server/console.ts";
import type { DrainCounts } from "./server/listener.ts";
import { buildServer } from "./server/server.ts";
import { authenticationInterceptor, callerOf, callerScope } from "./services/call.ts";
import type { ServiceDeps } from "./services/deps.ts";
import { apiServices } from "./services/index.ts";
import type { Database, ProcessLease } from "./storage/database.ts";
import { IdempotencyStore } from "./storage/idempotency.ts";
import { migrate } from "./storage/migrate.ts";
import { NotificationListener } from "./storage/notifications.ts";
import { openDatabase } from "./storage/open.ts";
import { tracedDatabase } from "./tracing/database.ts";
import { startTracing } from "./tracing/tracing.ts";

/** Everything a running Platform process holds; built once by `createPlatform`. */
export interface Platform {
  config: Config;
  db: Database;
  eventStore: EventStore;
  instances: InstanceDirectory;
  /** What the RPC implementations use (also handy in tests). */
  deps: ServiceDeps;
  app: FastifyInstance;
  /** The OpenID Connect provider (keys, clients, tokens; `issueAuthorizationCode` for the login flow). */
  oidc: OidcProvider;
  /** The login UI and browser sessions (src/login): what the OIDC protocol side plugs into. */
  login: Login;
  /** The execution engine: calls action targets (src/execution). */
  executions: Executions;
  /** The notification outbox and its worker (src/notifications/delivery.ts). */
  messages: NotificationDelivery;
  /** The Prometheus metrics (src/metrics), served where `config.metrics` says. */
  metrics: Metrics;
  /** The port of PLATFORM_METRICS_PORT's listener, once `listen` started it. */
  metricsPort?: number;
  bootstrapResult?: BootstrapResult;
  /**
   * Stops: accepts no more connections and the workers take no more rows; the requests of accepted
   * connections and the outbox sends in flight finish within PLATFORM_SHUTDOWN_GRACE_SECONDS (what is
   * left then is cut off); then LISTEN, the process lease and the database are closed, and one line says
   * what was finished and cut off. Safe to call twice.
   */
  close(): Promise<void>;
}

/** Opens the database, migrates, bootstraps on first start and builds the server (not yet listening). */
export async function createPlatform(
  config: Config,
  options: {
    db?: Database;
    authRequestCompleter?: AuthRequestCompleter;
    /** Resolves the host names of outbound connections in place of the system resolver (tests). */
    resolve?: Resolve;
    /** Where log lines go instead of stdout (tests read them). */
    logDestination?: DestinationStream;
    /** Certificates trusted besides the system's by SMTP providers' TLS (tests: a self-signed server). */
    smtpCa?: string[];
  } = {},
): Promise<Platform> {
  if (config.databaseUrl) resolveMasterKey(config); // fails before connecting when the key is missing
  // First, so that every seam built below (server, RPC chain, database, outbound calls) finds it on.
  let log: FastifyBaseLogger | undefined;
  const tracing = config.tracing
    ? await startTracing(config.tracing, { warn: (message) => log?.warn(message) })
    : undefined;
  let opened: Database;
  try {
    opened = options.db ?? (await openDatabase(config));
  } catch (error) {
    await tracing?.shutdown();
    throw error;
  }
  const db = tracing ? tracedDatabase(opened, tracing.tracer) : opened;
  let lease: ProcessLease | undefined;
  try {
    // Embedded: generated into the data directory on first start, now that this process holds its lock.
    const masterKey = resolveMasterKey(config);
    await migrate(db);
    const served = config.metrics.port !== undefined || metricsOnMainPort(config.metrics);
    const metrics = new Metrics({ processMetrics: served });
    metrics.watchDatabase(db);
    metrics.watchOutbox(db);
    const eventStore = new EventStore(db, projections);
    metrics.watchEventStore(eventStore);
    const instances = new InstanceDirectory(db);
    eventStore.onCommitted((events) => {
      for (const event of events)
        if (event.aggregateType === INSTANCE) instances.invalidate(event.aggregateId);
    });
    eventStore.onStale(() => instances.invalidate());
    const bootstrapResult = await bootstrap(eventStore, config);
    await ensureConsoleApps(eventStore, db, config);
    const outbound = OutboundPolicy.fromConfig(config, { resolve: options.resolve });
    const deps: ServiceDeps = {
      config,
      db,
      eventStore,
      instances,
      authenticator: new Authenticator(db, config, eventStore),
      authorizer: new Authorizer(db, eventStore),
      features: new FeatureGate(db, eventStore),
      masterKey,
      outbound,
      signingKeys: new SigningKeys(db, masterKey, eventStore),
      notifications: new NotificationSender({ db, masterKey, outbound, smtpCa: options.smtpCa }),
    };
    const app = buildServer({ config, db, instances, metrics, logDestination: options.logDestination });
    log = app.log;
    const executions = createExecutions({
      config,
      db,
      eventStore,
      features: deps.features,
      outbound,
      log: app.log.child({ component: "executions" }),
      metrics,
    });
    const messages = createNotificationDelivery({
      config,
      db,
      eventStore,
      sender: deps.notifications,
      masterKey,
      log: app.log.child({ component: "notifications" }),
      metrics,
    });
    deps.messages = messages;
    const oidc = createOidcProvider({
      config,
      db,
      eventStore,
      instances,
      features: deps.features,
      masterKey,
      authorizer: deps.authorizer,
      executions: executions.engine,
      keys: deps.signingKeys,
      metrics,
    });
    await oidc.keys.checkMasterKey();
    deps.authenticator.addVerifier(oidc.apiVerifier);
    oidc.register(app);
    const idempotency = new IdempotencyStore(db);
    // other processes tell by it whether this one still runs its calls (src/storage/process-lease.ts)
    lease = await idempotency.holdLease();
    app.addHook("onClose", () => lease?.release());
    const services = apiServices(deps);
    const api = registerApi(app, services, {
      interceptors: [authenticationInterceptor(deps)],
      readMaxBytes: config.maxRequestBodyBytes,
      innerInterceptors: [
        idempotencyInterceptor({ store: idempotency, callerScope }),
        // inside idempotency: a replayed answer calls no target again (src/execution/interceptor.ts)
        executions.interceptor(identifyCaller),
      ],
    });
    executions.engine.registry = api.registry;
    registerDocs(app, { services: services.map((s) => s.service) });
    registerReflection(
      app,
      services.map((s) => s.service),
    );
    const login = registerLogin(app, deps, { completer: options.authRequestCompleter ?? oidc.completer });
    oidc.registerBrowserEndpoints(app, login);
    registerConsole(app, { config, db });
    // Other processes on the database: what they change reaches this one's caches, their event deliveries
    // wake its worker (src/storage/notifications.ts).
    const listener =
      db.kind === "postgres" && config.databaseUrl
        ? new NotificationListener(config.databaseUrl, app.log.child({ component: "notifications" }))
        : undefined;
    eventStore.broadcast.log = app.log;
    if (listener) {
      listener.channel(CACHE_CHANNEL, eventStore.broadcast.channel(app.log));
      executions.listen(listener);
      messages.listen(listener);
      app.addHook("onClose", () => listener.close());
    }
    // stopped with the server (also when only the app is closed), before the database closes
    app.addHook("onClose", () => executions.close());
    app.addHook("onClose", () => messages.close());
    await app.ready();
    // serving starts with LISTEN in place (or being retried, logged)
    await listener?.start();
    executions.start();
    messages.start();
    // The embedded database admits this process only: `platform admin-token` asks it over
    // <dataDir>/admin.sock (mode 0600) instead (src/cli/admin-socket.ts). On PostgreSQL the command opens
    // the database itself.
    let adminSocket: AdminSocket | undefined;
    if (opened.kind === "pglite" && !options.db) {
      try {
        adminSocket = await listenAdminSocket(
          config.dataDir,
          (request) => issueAdminToken(db, eventStore, request),
          app.log.child({ component: "admin-socket" }),
        );
        // also when only the app is closed (tests do): the socket would keep the process alive
        const socket = adminSocket;
        app.server.once("close", () => void socket.close());
      } catch (error) {
        app.log.warn(
          { err: error },
          `cannot listen on the admin socket in ${config.dataDir}: platform admin-token needs the server stopped`,
        );
      }
    }

    let closing: Promise<void> | undefined;
    const close = () => {
      closing ??= (async () => {
        const started = Date.now();
        const deadline = started + config.shutdownGraceSeconds * 1000;
        // The workers take nothing more; their sends in flight finish while the requests do (until the
        // deadline). The onClose hooks below wait for these same stops.
        const deliveries = executions.close(deadline);
        const sent = messages.close(deadline);
        try {
          await adminSocket?.close();
          await platform.metricsListener?.close();
          // stops accepting, serves the requests of accepted connections, then the onClose hooks
          await app.close();
          await eventStore.broadcast.flushed(); // the last changes' notifications
        } finally {
          try {
            await db.close(); // the embedded database lets the queries still queued finish first
          } finally {
            logStop(app.log, {
              ms: Date.now() - started,
              graceSeconds: config.shutdownGraceSeconds,
              requests: (app.server as unknown as { drained?: DrainCounts }).drained ?? NONE,
              deliveries: await deliveries.catch(() => NONE),
              messages: await sent.catch(() => NONE),
            });
            await tracing?.shutdown(); // exports the spans still buffered
          }
        }
      })();
      return closing;
    };
    const platform: Platform & { metricsListener?: MetricsListener } = {
      config,
      db,
      eventStore,
      instances,
      deps,
      app,
      oidc,
      login,
      executions,
      messages,
      metrics,
      bootstrapResult,
      close,
    };
    return platform;
  } catch (error) {
    await lease?.release().catch(() => {});
    await db.close().catch(() => {});
    await tracing?.shutdown().catch(() => {});
    throw error;
  }
}

const NONE = { finished: 0, cutOff: 0 };

/**
 * The one line of a stop: what was in flight and finished, and what the grace period cut off (then a
 * warning naming PLATFORM_SHUTDOWN_GRACE_SECONDS).
 */
function logStop(
  log: FastifyBaseLogger,
  stop: {
    ms: number;
    graceSeconds: number;
    requests: DrainCounts;
    deliveries: StopCounts;
    messages: StopCounts;
  },
): void {
  const { requests, deliveries, messages } = stop;
  const n = (count: number, one: string, many: string) => `${count} ${count === 1 ? one : many}`;
  const counted = (key: keyof StopCounts) =>
    `${n(requests[key], "request", "requests")}, ${n(deliveries[key], "event delivery", "event deliveries")} ` +
    `and ${n(messages[key], "message", "messages")}`;
  const cutOff = requests.cutOff + deliveries.cutOff + messages.cutOff;
  const text =
    `stopped in ${(stop.ms / 1000).toFixed(1)} s: finished ${counted("finished")} in flight` +
    (cutOff > 0
      ? `; cut off ${counted("cutOff")} at the grace limit (PLATFORM_SHUTDOWN_GRACE_SECONDS=${stop.graceSeconds})`
      : "");
  const fields = { stop: { ms: stop.ms, requests, deliveries, messages } };
  if (cutOff > 0) log.warn(fields, text);
  else log.info(fields, text);
}

/** The caller of an API call as request and response targets are told (src/execution/interceptor.ts). */
function identifyCaller(values: ContextValues) {
  const caller = callerOf(values);
  if (!caller) return { orgId: "", projectId: "", userId: "" };
  // an access token's caller may name the project of its client (OIDC); a PAT's has none
  const projectId = (caller as { projectId?: string }).projectId ?? "";
  return { orgId: caller.kind === "user" ? caller.orgId : "", projectId, userId: caller.userId };
}

/** Listens on PLATFORM_PORT (all interfaces, IPv4 and IPv6); returns the bound port. */
export async function listen(platform: Platform): Promise<number> {
  try {
    await platform.app.listen({ port: platform.config.port, host: "::" });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE")
      throw new Error(`PLATFORM_PORT: port ${platform.config.port} is already in use`);
    if (code === "EACCES")
      throw new Error(`PLATFORM_PORT: not allowed to listen on port ${platform.config.port}`);
    throw error;
  }
  const address = platform.app.server.address();
  const { metrics } = platform.config;
  if (metrics.port !== undefined) {
    const listener = await listenForMetrics(
      platform.metrics,
      { ...metrics, port: metrics.port },
      platform.app.log.child({ component: "metrics" }),
    );
    (platform as Platform & { metricsListener?: MetricsListener }).metricsListener = listener;
    platform.metricsPort = listener.port;
  }
  return typeof address === "object" && address ? address.port : platform.config.port;
}
