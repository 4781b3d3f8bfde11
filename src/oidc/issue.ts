import { createHash } from "node:crypto";
import { SignJWT } from "jose";
import { sha256 } from "../crypto/tokens.ts";
import { acrOf } from "../domain/session/amr.ts";
import { machineUsernameProblem } from "../domain/user/machine-username.ts";
import { newId } from "../id.ts";
import type { Queryable } from "../storage/database.ts";
import {
  loadMetadata,
  loadUserData,
  roleClaims,
  USERINFO_SCOPES,
  type UserRecord,
  userClaims,
} from "./claims.ts";
import type { OidcClient } from "./clients.ts";
import type { OidcContext, RequestInfo } from "./context.ts";
import { InvalidScope, UnauthorizedClient } from "./errors.ts";
import { withFunctionClaims } from "./functions.ts";
import type { SigningKey } from "./keys.ts";
import { MANAGEMENT_PROJECT_ALIAS, type ParsedScope, Reserved, Scope, scopeFromValues } from "./scopes.ts";
import { type AccessTokenRecord, type Lineage, newHandle, type RefreshTokenRecord } from "./token-store.ts";

/** The audience of a client's tokens: its client ID, its project and the projects of audience scopes. */
export interface Audience {
  audience: string[];
  /** Project IDs in the audience (for role claims). */
  projectIds: string[];
}

/**
 * Resolves the audience scopes (`urn:platform:iam:org:project:id:<id>:aud`, `platform` = the instance's
 * management project) to project IDs. A client may name the management project (every client of the
 * instance may call its management APIs), the projects of its own organization and the projects granted
 * to its organization by an active project grant; any other project, existing or not, is invalid_scope
 * (one answer for both: another organization's project IDs cannot be probed); the answers are cached
 * (./project-audiences.ts). A machine user whose
 * username has the form of a generated ID (which would stand for a project or an app in the audience) gets
 * no tokens: unauthorized_client.
 */
export async function resolveAudience(
  ctx: OidcContext,
  info: RequestInfo,
  client: OidcClient,
  scope: ParsedScope,
): Promise<Audience> {
  if (client.kind === "machine") {
    const problem = machineUsernameProblem(client.clientId);
    if (problem) throw new UnauthorizedClient(`${problem}: rename the machine user`);
  }
  const management = info.instance.iamProjectId;
  const projectIds: string[] = client.projectId ? [client.projectId] : [];
  const toCheck: string[] = [];
  for (const requested of scope.audienceProjects) {
    const id = requested === MANAGEMENT_PROJECT_ALIAS ? management : requested;
    if (id !== management && id !== client.projectId && !toCheck.includes(id)) toCheck.push(id);
    if (!projectIds.includes(id)) projectIds.push(id);
  }
  if (toCheck.length > 0) {
    const allowed = await ctx.projectAudiences.openTo(info.instance.id, client.orgId, toCheck);
    const refused = toCheck.find((id) => !allowed.has(id));
    if (refused !== undefined) {
      throw new InvalidScope(
        `unknown project ${refused} in an audience scope: a client may name its organization's projects and the projects granted to it`,
      );
    }
  }
  return { audience: [client.clientId, ...projectIds], projectIds };
}

/** What a grant decided to issue. */
export interface Issuance {
  client: OidcClient;
  /** The user the tokens are for. */
  subject: string;
  /** Its claims (needed for an ID token). */
  user?: UserRecord;
  /** The granted scope (what the access token carries). */
  scope: ParsedScope;
  audience: Audience;
  /** Code or refresh-token family the tokens descend from (revoked together). */
  familyId?: string;
  sessionId?: string | null;
  authTime?: Date | null;
  amr?: string[] | null;
  nonce?: string | null;
  /** Issue an ID token (when the scope has openid). */
  idToken: boolean;
  /** Issue a refresh token of this family (its scope: the originally granted one). */
  refresh?: { familyId: string; scope: string[]; absoluteExpiresAt: Date };
  /** Token exchange: the access token's format, whatever the client's access_token_type says. */
  accessTokenFormat?: "opaque" | "jwt";
  /** Token exchange: no token issued expires after this (when the tokens it was exchanged from end). */
  notAfter?: Date;
  /** Token exchange: the actor (`act` claim) and the tokens the new ones descend from (stored with them). */
  lineage?: Lineage;
  /** The ID token's `aud` when it differs from the access token's audience. */
  idTokenAudience?: string[];
}

export interface TokenResponse {
  access_token: string;
  /** `N_A` only for a token exchange answering with an ID token (RFC 8693 §2.2.1). */
  token_type: "Bearer" | "N_A";
  /** Token exchange (RFC 8693 §2.2.1): the type of the token in access_token. */
  issued_token_type?: string;
  expires_in: number;
  scope?: string;
  id_token?: string;
  refresh_token?: string;
}

/** Tokens made but not stored yet. */
export interface PreparedTokens {
  response: TokenResponse;
  access: AccessTokenRecord;
  refresh?: RefreshTokenRecord;
}

/** Issues and stores the tokens of a grant (see `prepareTokens`). */
export async function issueTokens(
  ctx: OidcContext,
  info: RequestInfo,
  issuance: Issuance,
): Promise<TokenResponse> {
  const prepared = await prepareTokens(ctx, info, issuance);
  await storeTokens(ctx, prepared);
  return prepared.response;
}

/**
 * Stores prepared tokens: in `tx` when given (a grant that also consumes a code or refresh token commits
 * everything at once; nothing else may touch the database inside it, the embedded one has one connection).
 */
export async function storeTokens(ctx: OidcContext, prepared: PreparedTokens, tx?: Queryable): Promise<void> {
  await ctx.tokens.insertAccessToken(prepared.access, tx);
  if (prepared.refresh) await ctx.tokens.insertRefreshToken(prepared.refresh, tx);
}

/**
 * Makes the access token (opaque or JWT, as the client is configured) and, when asked, the ID token and
 * refresh token, with their rows; everything that reads the database or signs happens here.
 */
export async function prepareTokens(
  ctx: OidcContext,
  info: RequestInfo,
  issuance: Issuance,
): Promise<PreparedTokens> {
  const { client, scope } = issuance;
  const now = new Date();
  const iat = Math.floor(now.getTime() / 1000);
  const accessExp = cappedExp(iat + ctx.lifetimes.accessToken, issuance.notAfter);
  const jwt = (issuance.accessTokenFormat ?? client.accessTokenType) === "jwt";
  const tokenId = newId();
  const record: AccessTokenRecord = {
    instanceId: info.instance.id,
    id: tokenId,
    clientId: client.clientId,
    subject: issuance.subject,
    audience: issuance.audience.audience,
    scope: scope.values,
    jwt,
    secretHash: "",
    issuer: info.issuer,
    issuedAt: now,
    expiresAt: new Date(accessExp * 1000),
    familyId: issuance.familyId ?? null,
    sessionId: issuance.sessionId ?? null,
    authTime: issuance.authTime ?? null,
    amr: issuance.amr ?? null,
    lineage: issuance.lineage ?? null,
  };

  let accessToken: string;
  if (jwt) {
    const claims: Record<string, unknown> = {
      iss: info.issuer,
      sub: issuance.subject,
      aud: record.audience,
      exp: accessExp,
      iat,
      nbf: iat,
      jti: tokenId,
      client_id: client.clientId,
      scope: scope.values.join(" "),
    };
    if (issuance.lineage?.act) claims.act = issuance.lineage.act;
    // custom data only when the scope asks for it (docs/user-schemas.md)
    const data = await loadUserData(ctx.db, info.instance.id, issuance.subject, scope);
    if (data) claims[Reserved.userData] = data;
    if (client.accessTokenRoleAssertion) {
      Object.assign(claims, await rolesFor(ctx, info, issuance, client.projectRoleAssertion === true));
    }
    const withFunctions = await withFunctionClaims(
      ctx,
      info,
      "preaccesstoken",
      { userId: issuance.subject, user: issuance.user },
      client,
      claims,
    );
    accessToken = await sign(ctx, info, withFunctions, "at+jwt");
    record.secretHash = sha256(accessToken);
  } else {
    const handle = newHandle("at", tokenId);
    accessToken = handle.value;
    record.secretHash = handle.secretHash;
  }

  const response: TokenResponse = {
    access_token: accessToken,
    token_type: "Bearer",
    expires_in: accessExp - iat,
  };
  if (scope.values.length > 0) response.scope = scope.values.join(" ");

  let refresh: RefreshTokenRecord | undefined;
  if (issuance.refresh) {
    const refreshId = newId();
    const handle = newHandle("rt", refreshId);
    const idle = new Date(now.getTime() + ctx.lifetimes.refreshIdle * 1000);
    refresh = {
      instanceId: info.instance.id,
      id: refreshId,
      familyId: issuance.refresh.familyId,
      clientId: client.clientId,
      subject: issuance.subject,
      audience: record.audience,
      scope: issuance.refresh.scope,
      secretHash: handle.secretHash,
      issuer: info.issuer,
      issuedAt: now,
      expiresAt: idle < issuance.refresh.absoluteExpiresAt ? idle : issuance.refresh.absoluteExpiresAt,
      absoluteExpiresAt: issuance.refresh.absoluteExpiresAt,
      sessionId: issuance.sessionId ?? null,
      authTime: issuance.authTime ?? null,
      amr: issuance.amr ?? null,
      lineage: issuance.lineage ?? null,
    };
    response.refresh_token = handle.value;
  }

  if (issuance.idToken && scope.values.includes(Scope.openid)) {
    response.id_token = await idToken(ctx, info, issuance, { accessToken });
  }
  return { response, access: record, refresh };
}

/**
 * An ID token (OpenID Connect Core §2): signed by the instance's active key (with its algorithm), `aud` the
 * token audience (`idTokenAud`), `azp` the client, `at_hash` / `c_hash` when an access token / code comes with it. The profile, email,
 * phone and address claims are left out when an access token is issued too (they come from userinfo),
 * unless the client sets `id_token_userinfo_assertion`.
 */
export async function idToken(
  ctx: OidcContext,
  info: RequestInfo,
  issuance: Issuance,
  options: { accessToken?: string; code?: string; jti?: string },
): Promise<string> {
  const { client, user, scope } = issuance;
  if (!user) throw new Error("an ID token needs the user's claims");
  const iat = Math.floor(Date.now() / 1000);
  const claims: Record<string, unknown> = {
    iss: info.issuer,
    sub: user.id,
    aud: idTokenAud(issuance.idTokenAudience ?? issuance.audience.audience),
    exp: cappedExp(iat + ctx.lifetimes.idToken, issuance.notAfter),
    iat,
    azp: client.clientId,
    client_id: client.clientId,
  };
  if (options.jti) claims.jti = options.jti;
  if (issuance.lineage?.act) claims.act = issuance.lineage.act;
  if (issuance.authTime) claims.auth_time = Math.floor(issuance.authTime.getTime() / 1000);
  if (issuance.nonce) claims.nonce = issuance.nonce;
  if (issuance.amr?.length) claims.amr = issuance.amr;
  // the class the sign-in achieved, derived from its methods (a refresh keeps them, so the acr too)
  const acr = acrOf(issuance.amr);
  if (acr) claims.acr = acr;
  if (issuance.sessionId) claims.sid = issuance.sessionId;
  // the hash of at_hash / c_hash follows the signing algorithm
  const key = await ctx.keys.active(info.instance.id);
  if (options.accessToken) claims.at_hash = halfHash(options.accessToken, key.alg);
  if (options.code) claims.c_hash = halfHash(options.code, key.alg);
  const leaveOut = options.accessToken && !client.idTokenUserinfoAssertion ? USERINFO_SCOPES : undefined;
  const metadata = scope.values.includes(Reserved.metadata)
    ? await loadMetadata(ctx.db, info.instance.id, user.id)
    : undefined;
  const data = await loadUserData(ctx.db, info.instance.id, user.id, scope);
  Object.assign(claims, userClaims(user, scope, { leaveOut, metadata, data }));
  if (client.idTokenRoleAssertion) {
    Object.assign(claims, await rolesFor(ctx, info, issuance, client.projectRoleAssertion === true));
  }
  // an ID token with the userinfo claims gets what preuserinfo adds to them
  const withFunctions = leaveOut
    ? claims
    : await withFunctionClaims(ctx, info, "preuserinfo", { userId: user.id, user }, client, claims);
  return signWith(key, withFunctions, "JWT");
}

/**
 * An ID token's `aud`: a single audience as a string, several as an array (OpenID Connect Core §2 allows
 * both; clients that read it as a string, such as golang.org/x/oauth2/jwt, fail on a one-element array).
 * JWT access tokens keep an array whatever its length, like introspection's `aud` (docs/oidc.md "Tokens").
 */
export function idTokenAud(audience: string[]): string | string[] {
  return audience.length === 1 ? audience[0]! : audience;
}

async function rolesFor(
  ctx: OidcContext,
  info: RequestInfo,
  issuance: Issuance,
  force: boolean,
): Promise<Record<string, unknown>> {
  return roleClaims(
    ctx.userGrants,
    info.instance.id,
    issuance.subject,
    issuance.scope,
    { clientProjectId: issuance.client.projectId, audienceProjectIds: issuance.audience.projectIds },
    force,
  );
}

async function sign(ctx: OidcContext, info: RequestInfo, claims: Record<string, unknown>, typ: string) {
  return signWith(await ctx.keys.active(info.instance.id), claims, typ);
}

function signWith(key: SigningKey, claims: Record<string, unknown>, typ: string): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: key.alg, kid: key.kid, typ }).sign(key.privateKey!);
}

/** An `exp` (seconds) no later than `notAfter`, when there is one. */
function cappedExp(exp: number, notAfter: Date | undefined): number {
  return notAfter ? Math.min(exp, Math.floor(notAfter.getTime() / 1000)) : exp;
}

/**
 * `at_hash` / `c_hash`: base64url of the left half of the hash of the ASCII value, the hash of the ID
 * token's `alg` (SHA-256 for RS256 and ES256, SHA-384 for *384, SHA-512 for *512 and for EdDSA with
 * Ed25519, as OpenID Connect's proposal for EdDSA and ZITADEL do).
 */
export function halfHash(value: string, alg = "RS256"): string {
  const bits = alg === "EdDSA" ? "512" : alg.slice(2);
  const hash = bits === "384" ? "sha384" : bits === "512" ? "sha512" : "sha256";
  const digest = createHash(hash).update(value, "ascii").digest();
  return digest.subarray(0, digest.length / 2).toString("base64url");
}

/** The scope without offline_access (grants that never issue refresh tokens). */
export function withoutOfflineAccess(scope: ParsedScope): ParsedScope {
  return scopeFromValues(scope.values.filter((v) => v !== Scope.offlineAccess));
}
