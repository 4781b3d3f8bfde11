import type { FastifyRequest } from "fastify";
import type { Authorizer } from "../auth/authorize.ts";
import type { Config } from "../config.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import type { ExecutionEngine } from "../execution/engine.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { FeatureGate } from "../query/features.ts";
import type { InstanceDirectory, InstanceInfo } from "../query/instances.ts";
import type { Database } from "../storage/database.ts";
import type { ClientRegistry } from "./clients.ts";
import { issuerFor, type OidcPath } from "./issuer.ts";
import type { SigningKeys } from "./keys.ts";
import type { ProjectAudiences } from "./project-audiences.ts";
import type { TokenStore } from "./token-store.ts";
import type { UserGrantSource } from "./user-grants.ts";

/** Token and code lifetimes in seconds (defaults: docs/oidc.md). */
export interface Lifetimes {
  accessToken: number;
  idToken: number;
  /** A refresh token unused this long expires. */
  refreshIdle: number;
  /** A refresh-token family ends this long after its first token, used or not. */
  refreshAbsolute: number;
  authorizationCode: number;
  /** How old a jwt-bearer assertion (`iat`) and how far ahead a client assertion (`exp`) may be. */
  assertionMaxAge: number;
}

export const defaultLifetimes: Lifetimes = {
  accessToken: 12 * 3600,
  idToken: 12 * 3600,
  refreshIdle: 30 * 86400,
  refreshAbsolute: 90 * 86400,
  authorizationCode: 600,
  assertionMaxAge: 3600,
};

/** What every endpoint and grant of the provider works with. */
export interface OidcContext {
  config: Config;
  db: Database;
  instances: InstanceDirectory;
  features: FeatureGate;
  keys: SigningKeys;
  clients: ClientRegistry;
  tokens: TokenStore;
  userGrants: UserGrantSource;
  /** Which projects a client's organization may name in audience scopes (cached). */
  projectAudiences: ProjectAudiences;
  lifetimes: Lifetimes;
  /** For grants that record events (token exchange: `user.impersonated`). */
  eventStore: EventStore;
  /** Users' permissions from their memberships (token exchange: may the actor impersonate). */
  authorizer: Authorizer;
  /** The execution engine, for the function conditions `preuserinfo` and `preaccesstoken` (./functions.ts). */
  executions?: ExecutionEngine;
  /** Counts the tokens issued by grant (src/metrics). */
  metrics?: Metrics;
}

/** The instance a request addressed and its issuer there. */
export interface RequestInfo {
  instance: InstanceInfo;
  issuer: string;
}

/** The instance (resolved from the Host by the server's onRequest hook) and the issuer of a request. */
export async function requestInfo(ctx: OidcContext, request: FastifyRequest): Promise<RequestInfo> {
  const instance = await ctx.instances.byHost(request.scope.host);
  if (!instance || instance.id !== request.scope.instanceId)
    throw new Error("instance of the request not found");
  return { instance, issuer: issuerFor(ctx.config, request.scope.host) };
}

export function endpointUrl(info: RequestInfo, path: (typeof OidcPath)[keyof typeof OidcPath]): string {
  return `${info.issuer}${path}`;
}
