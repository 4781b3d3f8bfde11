/**
 * The authorization endpoint's request validation (docs/oidc.md "Authorization endpoint":
 * parameters and errors). The order matters: until the client and its redirect URI are known
 * to be good, an error can only be shown at the server (`page`); afterwards every error goes to the
 * redirect URI (`redirect`) with `error`, `error_description`, `state` and `iss`.
 *
 * What the browser sees next (a session reused at once, the login UI, prompt=none's answer) is decided by
 * ../browser.ts; this module only answers whether the request is valid and what it asks for.
 */
import { OrgState } from "../../domain/org/events.ts";
import { supportedAcrValues } from "../../domain/session/amr.ts";
import type { AuthRequestInput, Prompt } from "../../login/index.ts";
import type { OidcClient } from "../clients.ts";
import type { OidcContext, RequestInfo } from "../context.ts";
import {
  InvalidRequest,
  InvalidScope,
  type OAuthError,
  RequestNotSupported,
  RequestUriNotSupported,
  UnauthorizedClient,
  UnsupportedResponseType,
} from "../errors.ts";
import type { CollectedParams } from "../http.ts";
import { verifyIdTokenHint } from "../id-token-hint.ts";
import { resolveAudience } from "../issue.ts";
import { isRegisteredRedirectUri, malformedRedirectUri } from "../redirect-uris.ts";
import { parseScope, Reserved, Scope } from "../scopes.ts";

export type ResponseType = "code" | "id_token" | "id_token token";
export type ResponseMode = "query" | "fragment" | "form_post";

/** Where and how an authorization response (or error) goes. */
export interface ResponseTarget {
  redirectUri: string;
  responseMode: ResponseMode;
  /** Echoed unchanged (absent when the request had none, or gave it twice). */
  state?: string;
  /** For the language of a form_post page. */
  uiLocales?: string[];
}

export type AuthorizeOutcome =
  /** No usable client or redirect URI: the error is shown at the server, never redirected. */
  | { kind: "page"; error: OAuthError }
  /** Invalid request of a known client: the error goes to its redirect URI. */
  | { kind: "redirect"; target: ResponseTarget; error: OAuthError }
  /** A valid request: what to store as the auth request (`instanceId` and the browser are added later). */
  | {
      kind: "valid";
      client: OidcClient;
      target: ResponseTarget;
      request: Omit<AuthRequestInput, "instanceId" | "userAgentHash">;
    };

/** Longest value of the free-form parameters (state, nonce, ui_locales, …) accepted. */
const MAX_VALUE = 4096;
/** Longest login_hint (the login UI keeps at most 400 characters of a login name). */
const MAX_LOGIN_HINT = 400;
/** The S256 challenge: base64url of a SHA-256, 43 characters (RFC 7636 §4.2). */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
/** A language tag of ui_locales (BCP 47, loosely). */
const LANGUAGE_TAG = /^[A-Za-z]{1,8}(-[A-Za-z0-9]{1,8})*$/;
const PROMPTS: ReadonlySet<string> = new Set<Prompt>([
  "none",
  "login",
  "consent",
  "select_account",
  "create",
]);
const RESPONSE_MODES: ReadonlySet<string> = new Set<ResponseMode>(["query", "fragment", "form_post"]);

/** `response_type` with its space-separated values in any order (RFC 6749 §3.1.1). */
function normalizeResponseType(raw: string): string {
  return [...new Set(raw.split(" ").filter(Boolean))].sort().join(" ");
}

const SUPPORTED_RESPONSE_TYPES: Record<string, ResponseType> = {
  code: "code",
  id_token: "id_token",
  "id_token token": "id_token token",
};

/**
 * The response mode: `response_mode` when it is a known value, else the response type's default (query for
 * `code`, fragment when the response carries tokens). Invalid values are ignored, and
 * so is `query` for a response with tokens: tokens never go into a query string (OAuth 2.0 Multiple
 * Response Type Encoding Practices §3.0).
 */
function responseModeOf(params: CollectedParams, responseType: string): ResponseMode {
  const carriesTokens = responseType.split(" ").some((t) => t === "token" || t === "id_token");
  const given = params.repeated.has("response_mode") ? undefined : params.values.get("response_mode");
  if (given && RESPONSE_MODES.has(given) && !(given === "query" && carriesTokens)) {
    return given as ResponseMode;
  }
  return carriesTokens ? "fragment" : "query";
}

function uiLocalesOf(raw: string | undefined): string[] {
  if (!raw) return [];
  return raw
    .slice(0, MAX_VALUE)
    .split(" ")
    .filter((tag) => LANGUAGE_TAG.test(tag))
    .slice(0, 20);
}

/** Validates an authorization request of the instance `info` (see the module comment for the order). */
export async function validateAuthorizeRequest(
  ctx: OidcContext,
  info: RequestInfo,
  params: CollectedParams,
): Promise<AuthorizeOutcome> {
  const { values, repeated } = params;
  const page = (description: string): AuthorizeOutcome => ({
    kind: "page",
    error: new InvalidRequest(description),
  });

  // 1. The client.
  if (repeated.has("client_id")) return page("parameter client_id is repeated");
  const clientId = values.get("client_id");
  if (clientId === undefined) return page("parameter client_id is required");
  const client =
    clientId.length <= 200 ? await ctx.clients.byClientId(info.instance.id, clientId) : undefined;
  if (!client?.active || client.redirectUris.length === 0) {
    return page("client_id is not an application of this instance that can sign people in");
  }

  // 2. Its redirect URI: only a registered one may receive anything, errors included.
  if (repeated.has("redirect_uri")) return page("parameter redirect_uri is repeated");
  const redirectUri = values.get("redirect_uri");
  if (redirectUri === undefined) return page("parameter redirect_uri is required");
  const malformed = malformedRedirectUri(redirectUri);
  if (malformed) return page(`redirect_uri is malformed: ${malformed}`);
  if (!isRegisteredRedirectUri(client, redirectUri)) {
    return page("redirect_uri is not one of the application's registered redirect URIs");
  }

  // From here on, errors go to the redirect URI.
  const rawResponseType = repeated.has("response_type") ? "" : (values.get("response_type") ?? "");
  const responseTypeKey = normalizeResponseType(rawResponseType);
  const state = repeated.has("state") ? undefined : values.get("state");
  const uiLocales = uiLocalesOf(repeated.has("ui_locales") ? undefined : values.get("ui_locales"));
  const target: ResponseTarget = {
    redirectUri,
    responseMode: responseModeOf(params, responseTypeKey),
    state: state !== undefined && state.length <= MAX_VALUE ? state : undefined,
    uiLocales,
  };
  const fail = (error: OAuthError): AuthorizeOutcome => ({ kind: "redirect", target, error });

  if (repeated.size > 0) return fail(new InvalidRequest(`parameter ${[...repeated][0]} is repeated`));
  if (values.has("request")) return fail(new RequestNotSupported());
  if (values.has("request_uri")) return fail(new RequestUriNotSupported());
  for (const name of [
    "state",
    "nonce",
    "ui_locales",
    "scope",
    "max_age",
    "prompt",
    "code_challenge",
    "acr_values",
  ]) {
    if ((values.get(name)?.length ?? 0) > MAX_VALUE)
      return fail(new InvalidRequest(`parameter ${name} is too long: at most ${MAX_VALUE} characters`));
  }

  // 3. Response type.
  if (!values.has("response_type")) return fail(new InvalidRequest("parameter response_type is required"));
  const responseType = Object.hasOwn(SUPPORTED_RESPONSE_TYPES, responseTypeKey)
    ? SUPPORTED_RESPONSE_TYPES[responseTypeKey]
    : undefined;
  if (!responseType) {
    return fail(
      new UnsupportedResponseType(
        `response_type ${JSON.stringify(rawResponseType)} is not supported: use code, id_token or "id_token token"`,
      ),
    );
  }
  if (!client.responseTypes.includes(responseType)) {
    return fail(
      new UnauthorizedClient(
        `the application may not use response_type ${JSON.stringify(responseType)}; check its configuration`,
      ),
    );
  }
  const implicit = responseType !== "code";

  // 4. Scope: openid, known scopes, existing projects and organization.
  const rawScope = values.get("scope");
  if (rawScope === undefined) return fail(new InvalidRequest("parameter scope is required"));
  let scope: ReturnType<typeof parseScope>;
  try {
    scope = parseScope(rawScope);
    if (!scope.values.includes(Scope.openid)) throw new InvalidScope("the scope must contain openid");
    await resolveAudience(ctx, info, client, scope);
  } catch (error) {
    if (error instanceof InvalidScope) return fail(error);
    throw error;
  }
  const orgScopes = scope.values.filter((v) => Reserved.org.test(v));
  if (orgScopes.length > 1) return fail(new InvalidScope("at most one organization scope may be given"));
  const orgId = orgScopes.length ? Reserved.org.exec(orgScopes[0])![1] : undefined;
  if (orgId !== undefined) {
    const rows = await ctx.db.query<{ state: number }>(
      "SELECT state FROM orgs WHERE instance_id = $1 AND id = $2",
      [info.instance.id, orgId],
    );
    if (rows.length === 0 || Number(rows[0].state) !== OrgState.active) {
      return fail(new InvalidScope(`the organization ${orgId} does not exist or is not active`));
    }
  }

  // 5. PKCE (code flow): S256 only; required for public clients.
  const challenge = values.get("code_challenge");
  const challengeMethod = values.get("code_challenge_method");
  let codeChallenge: AuthRequestInput["codeChallenge"];
  if (challenge === undefined && challengeMethod !== undefined) {
    return fail(new InvalidRequest("code_challenge_method given without code_challenge"));
  }
  if (challenge !== undefined && !implicit) {
    if (challengeMethod !== "S256") {
      return fail(
        new InvalidRequest(
          challengeMethod === undefined || challengeMethod === "plain"
            ? "code_challenge_method must be S256 (plain is not allowed)"
            : `code_challenge_method ${JSON.stringify(challengeMethod)} is not supported: use S256`,
        ),
      );
    }
    if (!S256_CHALLENGE.test(challenge)) {
      return fail(new InvalidRequest("code_challenge must be the base64url SHA-256 of the code verifier"));
    }
    codeChallenge = { challenge, method: "S256" };
  }
  if (!implicit && !codeChallenge && client.authMethods.has("none")) {
    return fail(new InvalidRequest("code_challenge (PKCE, S256) is required for this application"));
  }

  // 6. nonce (required for the implicit flow).
  const nonce = values.get("nonce");
  if (implicit && nonce === undefined) {
    return fail(new InvalidRequest("parameter nonce is required for the implicit flow"));
  }

  // 7. prompt, max_age, login_hint.
  const prompt = [...new Set((values.get("prompt") ?? "").split(" ").filter(Boolean))];
  const unknownPrompt = prompt.find((p) => !PROMPTS.has(p));
  if (unknownPrompt !== undefined) {
    return fail(new InvalidRequest(`prompt ${JSON.stringify(unknownPrompt)} is not supported`));
  }
  if (prompt.includes("none") && prompt.length > 1) {
    return fail(new InvalidRequest("prompt none cannot be combined with other values"));
  }
  const rawMaxAge = values.get("max_age");
  if (rawMaxAge !== undefined && !/^\d{1,9}$/.test(rawMaxAge)) {
    return fail(new InvalidRequest("max_age must be a number of seconds"));
  }
  const loginHint = values.get("login_hint");
  if (loginHint !== undefined && loginHint.length > MAX_LOGIN_HINT) {
    return fail(new InvalidRequest(`login_hint is too long: at most ${MAX_LOGIN_HINT} characters`));
  }

  // 8. id_token_hint: an ID token of this instance (expired ones too); it selects its session.
  let hint: Awaited<ReturnType<typeof verifyIdTokenHint>>;
  const rawHint = values.get("id_token_hint");
  if (rawHint !== undefined) {
    hint = await verifyIdTokenHint(ctx, info, rawHint);
    if (!hint) return fail(new InvalidRequest("id_token_hint is not a valid ID token of this issuer"));
  }

  return {
    kind: "valid",
    client,
    target,
    request: {
      clientId: client.clientId,
      redirectUri,
      responseType,
      responseMode: target.responseMode,
      scope: scope.values,
      state: target.state,
      nonce,
      codeChallenge,
      prompt: prompt as Prompt[],
      loginHint,
      maxAge: rawMaxAge === undefined ? undefined : Number(rawMaxAge),
      uiLocales,
      acrValues: supportedAcrValues(values.get("acr_values")),
      orgId,
      hintSessionId: hint?.sessionId,
      hintUserId: hint?.userId,
    },
  };
}
