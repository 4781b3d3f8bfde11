/**
 * OAuth 2.0 / OpenID Connect errors (RFC 6749 §5.2, RFC 6750 §3.1, RFC 7009, RFC 7662): each a named class
 * carrying its `error` code and HTTP status. Endpoints answer them as `{error, error_description}` with
 * `Cache-Control: no-store` (see `sendOAuthError` in ./http.ts).
 */
export class OAuthError extends Error {
  constructor(
    readonly error: string,
    readonly status: number,
    readonly description: string,
  ) {
    super(description);
    this.name = new.target.name;
  }
}

/** Missing or repeated parameter, unsupported value, several client authentication methods, malformed request. */
export class InvalidRequest extends OAuthError {
  constructor(description: string) {
    super("invalid_request", 400, description);
  }
}

/** Client authentication failed: unknown client, no or wrong credentials, a method the client may not use. */
export class InvalidClient extends OAuthError {
  constructor(
    description = "client authentication failed",
    /** The client tried HTTP Basic: the answer carries `WWW-Authenticate: Basic`. */
    readonly basic = false,
  ) {
    super("invalid_client", 401, description);
  }
}

/** Code, refresh token or assertion invalid, expired, revoked, used, of another client, or redirect mismatch. */
export class InvalidGrant extends OAuthError {
  constructor(description: string) {
    super("invalid_grant", 400, description);
  }
}

/** The authenticated client may not use this grant type. */
export class UnauthorizedClient extends OAuthError {
  constructor(description: string) {
    super("unauthorized_client", 400, description);
  }
}

export class UnsupportedGrantType extends OAuthError {
  constructor(description: string) {
    super("unsupported_grant_type", 400, description);
  }
}

/** Scope invalid, unknown, malformed, or larger than granted. */
export class InvalidScope extends OAuthError {
  constructor(description: string) {
    super("invalid_scope", 400, description);
  }
}

/** Bearer token invalid, expired or revoked (userinfo): 401 with `WWW-Authenticate: Bearer error="invalid_token"`. */
export class InvalidToken extends OAuthError {
  constructor(description = "the access token is invalid, expired or revoked") {
    super("invalid_token", 401, description);
  }
}

/** Token exchange: a `resource` or an audience outside the tokens' audiences. */
export class InvalidTarget extends OAuthError {
  constructor(description: string) {
    super("invalid_target", 400, description);
  }
}

/** The database cannot be reached right now: 503 with Retry-After; retrying later may succeed. */
export class TemporarilyUnavailable extends OAuthError {
  constructor(description = "temporarily unavailable; retry later") {
    super("temporarily_unavailable", 503, description);
  }
}

/** An unexpected condition; the description never carries internals. */
export class ServerError extends OAuthError {
  constructor(description = "unexpected condition; try again later") {
    super("server_error", 500, description);
  }
}

/** Authorization endpoint: a `response_type` this provider does not offer (`token` alone, hybrid types, …). */
export class UnsupportedResponseType extends OAuthError {
  constructor(description: string) {
    super("unsupported_response_type", 400, description);
  }
}

/** Authorization endpoint: the `request` parameter (request objects, OIDC Core §6) is not supported. */
export class RequestNotSupported extends OAuthError {
  constructor(description = "request objects (the request parameter) are not supported") {
    super("request_not_supported", 400, description);
  }
}

/** Authorization endpoint: the `request_uri` parameter (OIDC Core §6.2) is not supported. */
export class RequestUriNotSupported extends OAuthError {
  constructor(description = "the request_uri parameter is not supported") {
    super("request_uri_not_supported", 400, description);
  }
}
