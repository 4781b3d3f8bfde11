/**
 * Sign-in of the console (docs/console.md): the authorization code flow with PKCE (S256) against the
 * instance's own OpenID Connect provider, as the public "Console" app, through oauth4webapi.
 *
 * - Tokens (access, refresh, ID) live in this module's memory only: never in localStorage, sessionStorage,
 *   cookies or the URL. A reload signs in again (the login UI's session makes that a round trip).
 * - For the redirect round trip only, sessionStorage holds the PKCE code verifier, the state, the nonce and
 *   the path to come back to, under one key removed as the callback reads it. They are not tokens: the
 *   verifier is worth something only together with the code, which comes back once and is redeemed at once.
 * - The session renews before the access token expires with the refresh token (rotated at each use), with
 *   no reload; a failed renewal signs in again.
 * - Signing out goes through end_session with the ID token as id_token_hint.
 */
import * as oauth from "oauth4webapi";
import type { ConsoleConfig } from "./config.ts";

const SCOPE = "openid profile email offline_access urn:platform:iam:org:project:id:platform:aud";
const PENDING_KEY = "platform.console.sign-in";
const SIGNED_OUT_KEY = "platform.console.signed-out";
/** Renew this long before the access token expires. */
const RENEW_BEFORE_MS = 60_000;

export interface SignedInUser {
  subject: string;
  name: string;
  username?: string;
  email?: string;
}

interface Tokens {
  accessToken: string;
  refreshToken?: string;
  idToken?: string;
  expiresAt: number;
}

interface Pending {
  verifier: string;
  state: string;
  nonce: string;
  returnTo: string;
}

export class Auth {
  private tokens: Tokens | undefined;
  private renewTimer: ReturnType<typeof setTimeout> | undefined;
  private renewing: Promise<void> | undefined;
  private listeners = new Set<() => void>();
  user: SignedInUser | undefined;

  private constructor(
    private readonly config: ConsoleConfig,
    private readonly as: oauth.AuthorizationServer,
  ) {}

  static async discover(config: ConsoleConfig): Promise<Auth> {
    const issuer = new URL(config.issuer);
    const response = await oauth.discoveryRequest(issuer, { algorithm: "oidc", ...insecure(issuer) });
    return new Auth(config, await oauth.processDiscoveryResponse(issuer, response));
  }

  private get client(): oauth.Client {
    return { client_id: this.config.clientId };
  }

  private get redirectUri(): string {
    return `${location.origin}${this.config.basePath}/callback`;
  }

  get signedIn(): boolean {
    return this.tokens !== undefined;
  }

  /** The current access token (renewed first when it is about to expire). */
  async accessToken(): Promise<string> {
    if (this.tokens && this.tokens.expiresAt - Date.now() < RENEW_BEFORE_MS / 2) await this.renew();
    if (!this.tokens) throw new Error("not signed in");
    return this.tokens.accessToken;
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Whether the page is the post-logout landing of a sign-out this tab started (and forgets it). */
  static justSignedOut(): boolean {
    const state = new URL(location.href).searchParams.get("state");
    const expected = sessionStorage.getItem(SIGNED_OUT_KEY);
    sessionStorage.removeItem(SIGNED_OUT_KEY);
    return state !== null && state === expected;
  }

  /** Sends the browser to the authorization endpoint; `returnTo` is the console path to come back to. */
  async signIn(returnTo = location.pathname + location.search): Promise<never> {
    const pending: Pending = {
      verifier: oauth.generateRandomCodeVerifier(),
      state: oauth.generateRandomState(),
      nonce: oauth.generateRandomNonce(),
      returnTo: returnTo.startsWith(this.config.basePath) ? returnTo : `${this.config.basePath}/`,
    };
    sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
    const url = new URL(this.as.authorization_endpoint!);
    url.search = new URLSearchParams({
      client_id: this.config.clientId,
      redirect_uri: this.redirectUri,
      response_type: "code",
      scope: SCOPE,
      state: pending.state,
      nonce: pending.nonce,
      code_challenge: await oauth.calculatePKCECodeChallenge(pending.verifier),
      code_challenge_method: "S256",
    }).toString();
    location.assign(url.href);
    return new Promise<never>(() => {}); // the page is leaving
  }

  /** On the redirect URI: redeems the code; answers the console path to show. */
  async completeSignIn(): Promise<string> {
    const raw = sessionStorage.getItem(PENDING_KEY);
    sessionStorage.removeItem(PENDING_KEY);
    if (!raw) throw new Error("no sign-in is pending in this tab");
    const pending = JSON.parse(raw) as Pending;
    const params = oauth.validateAuthResponse(this.as, this.client, new URL(location.href), pending.state);
    const response = await oauth.authorizationCodeGrantRequest(
      this.as,
      this.client,
      oauth.None(),
      params,
      this.redirectUri,
      pending.verifier,
      insecure(new URL(this.config.issuer)),
    );
    const result = await oauth.processAuthorizationCodeResponse(this.as, this.client, response, {
      expectedNonce: pending.nonce,
      requireIdToken: true,
    });
    this.accept(result);
    const claims = oauth.getValidatedIdTokenClaims(result)!;
    this.user = {
      subject: claims.sub,
      name: String(claims.name ?? claims.preferred_username ?? claims.sub),
      username: claims.preferred_username as string | undefined,
      email: claims.email as string | undefined,
    };
    return pending.returnTo;
  }

  /** Refresh-token grant (the server rotates the refresh token); on failure, signs in again. */
  renew(): Promise<void> {
    this.renewing ??= (async () => {
      try {
        const refreshToken = this.tokens?.refreshToken;
        if (!refreshToken) throw new Error("no refresh token");
        const response = await oauth.refreshTokenGrantRequest(
          this.as,
          this.client,
          oauth.None(),
          refreshToken,
          insecure(new URL(this.config.issuer)),
        );
        this.accept(await oauth.processRefreshTokenResponse(this.as, this.client, response));
      } catch {
        this.tokens = undefined;
        await this.signIn();
      } finally {
        this.renewing = undefined;
      }
    })();
    return this.renewing;
  }

  /** Ends the session at the provider (end_session with id_token_hint); the tokens are dropped first. */
  signOut(): void {
    const idToken = this.tokens?.idToken;
    this.tokens = undefined;
    clearTimeout(this.renewTimer);
    const state = oauth.generateRandomState();
    sessionStorage.setItem(SIGNED_OUT_KEY, state);
    const url = new URL(this.as.end_session_endpoint!);
    url.search = new URLSearchParams({
      client_id: this.config.clientId,
      post_logout_redirect_uri: `${location.origin}${this.config.basePath}/`,
      state,
      ...(idToken ? { id_token_hint: idToken } : {}),
    }).toString();
    location.assign(url.href);
  }

  private accept(result: oauth.TokenEndpointResponse): void {
    const expiresIn = result.expires_in ?? 300;
    this.tokens = {
      accessToken: result.access_token,
      refreshToken: result.refresh_token ?? this.tokens?.refreshToken,
      idToken: result.id_token ?? this.tokens?.idToken,
      expiresAt: Date.now() + expiresIn * 1000,
    };
    clearTimeout(this.renewTimer);
    this.renewTimer = setTimeout(
      () => void this.renew(),
      Math.max(5_000, expiresIn * 1000 - RENEW_BEFORE_MS),
    );
    for (const listener of this.listeners) listener();
  }
}

/** oauth4webapi refuses http issuers unless told: a loopback or dev-mode instance is served over http. */
function insecure(issuer: URL): { [oauth.allowInsecureRequests]?: boolean } {
  return issuer.protocol === "http:" ? { [oauth.allowInsecureRequests]: true } : {};
}
