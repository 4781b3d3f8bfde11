import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createRemoteJWKSet, decodeJwt, jwtVerify } from "jose";
import {
  authorizePath,
  createOidcApp,
  createProject,
  responseParams,
  signInThroughUi,
} from "../../test/authorize.ts";
import { restClient, startPlatform, type TestPlatform } from "../../test/helpers.ts";
import { type Answer, addHuman, formOf, HttpBrowser } from "../../test/login.ts";
import { client, discover, ownerToken } from "../../test/oidc.ts";
import { halfHash } from "./issue.ts";

const WEB_CALLBACK = "https://web.example/callback";
const WEB_SIGNED_OUT = "https://web.example/signed-out";
const SPA_CALLBACK = "https://spa.example/cb";
const NATIVE_CALLBACK = "http://127.0.0.1/callback";
const PASSWORD = "Secret-Passw0rd!";

/**
 * The authorization endpoint at the protocol level (parameters and errors as docs/oidc.md
 * lists them) and the end-session endpoint, with apps made through the apps API and a cookie-keeping HTTP
 * client standing in for the browser (redirects read, not followed out of the platform); tokens are
 * redeemed and verified by openid-client.
 */
describe("authorization endpoint", () => {
  let platform: TestPlatform;
  let web: { clientId: string; clientSecret?: string };
  let spa: { clientId: string };
  let native: { clientId: string };
  let webConfig: client.Configuration;
  let aliceId: string;
  let bobId: string;
  let owner: string;
  const browser = () => new HttpBrowser(platform.url);

  /** A code flow request of the web app (PKCE, nonce, state); `extra` overrides. */
  const codeRequest = async (extra: Record<string, string | undefined> = {}) => {
    const verifier = client.randomPKCECodeVerifier();
    const params: Record<string, string | undefined> = {
      client_id: web.clientId,
      redirect_uri: WEB_CALLBACK,
      response_type: "code",
      scope: "openid profile email offline_access",
      state: client.randomState(),
      nonce: client.randomNonce(),
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
      ...extra,
    };
    return { params, verifier, path: authorizePath(params) };
  };

  /** Redeems the code of an authorization response with openid-client (ID token verified). */
  const redeem = async (answer: Answer, request: Awaited<ReturnType<typeof codeRequest>>) => {
    const { url } = responseParams(answer);
    return client.authorizationCodeGrant(webConfig, url, {
      pkceCodeVerifier: request.verifier,
      expectedState: request.params.state,
      expectedNonce: request.params.nonce,
      idTokenExpected: true,
    });
  };

  /** Signs `loginName` in through the login UI in `b` with a code request; answers the tokens. */
  const signIn = async (b: HttpBrowser, loginName: string, extra: Record<string, string> = {}) => {
    const request = await codeRequest(extra);
    const answer = await signInThroughUi(b, request.path, loginName, PASSWORD);
    return redeem(answer, request);
  };

  /** An error at the redirect URI: `error`, a description, the request's state, and `iss`. */
  const assertRedirectError = (
    answer: Answer,
    error: string,
    options: { state?: string; redirectUri?: string; mode?: string; description?: RegExp } = {},
  ) => {
    const { url, params, mode } = responseParams(answer);
    assert.equal(`${url.origin}${url.pathname}`, options.redirectUri ?? WEB_CALLBACK);
    assert.equal(mode, options.mode ?? "query");
    assert.equal(params.get("error"), error, answer.location ?? answer.text.slice(0, 200));
    assert.ok(params.get("error_description"), "an error_description");
    if (options.description) assert.match(params.get("error_description")!, options.description);
    assert.equal(params.get("state"), options.state ?? null);
    assert.equal(params.get("iss"), platform.url);
  };

  /** The error page at the server: 400, HTML, no redirect, framing forbidden. */
  const assertErrorPage = (answer: Answer, description: RegExp) => {
    assert.equal(answer.status, 400, answer.text.slice(0, 300));
    assert.equal(answer.location, undefined, "no redirect");
    assert.match(answer.headers.get("content-type") ?? "", /^text\/html/);
    assert.equal(answer.headers.get("x-frame-options"), "DENY");
    assert.match(answer.headers.get("content-security-policy") ?? "", /frame-ancestors 'none'/);
    assert.equal(answer.headers.get("referrer-policy"), "no-referrer");
    assert.match(answer.text, /<code>invalid_request<\/code>/);
    assert.match(answer.text, description);
  };

  const authRequestCount = async () =>
    Number((await platform.db.query<{ n: number }>("SELECT count(*)::int AS n FROM auth_requests"))[0].n);

  before(async () => {
    platform = await startPlatform({ listen: true });
    owner = await ownerToken(platform);
    const projectId = await createProject(platform, owner, "Shop");
    web = await createOidcApp(platform, owner, projectId, "web", {
      redirect_uris: [WEB_CALLBACK],
      post_logout_redirect_uris: [WEB_SIGNED_OUT],
      response_types: ["OIDC_RESPONSE_TYPE_CODE"],
      grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"],
      app_type: "OIDC_APP_TYPE_WEB",
      auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
    });
    spa = await createOidcApp(platform, owner, projectId, "spa", {
      redirect_uris: [SPA_CALLBACK],
      response_types: [
        "OIDC_RESPONSE_TYPE_CODE",
        "OIDC_RESPONSE_TYPE_ID_TOKEN",
        "OIDC_RESPONSE_TYPE_ID_TOKEN_TOKEN",
      ],
      grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_IMPLICIT"],
      app_type: "OIDC_APP_TYPE_USER_AGENT",
      auth_method: "OIDC_AUTH_METHOD_TYPE_NONE",
    });
    native = await createOidcApp(platform, owner, projectId, "native", {
      redirect_uris: [NATIVE_CALLBACK, "com.example.app:/cb"],
      app_type: "OIDC_APP_TYPE_NATIVE",
      auth_method: "OIDC_AUTH_METHOD_TYPE_NONE",
    });
    webConfig = await discover(platform.url, web.clientId, client.ClientSecretBasic(web.clientSecret!));
    aliceId = await addHuman(platform, "alice", PASSWORD, { givenName: "Alice", familyName: "Martin" });
    bobId = await addHuman(platform, "bob", PASSWORD, { givenName: "Bob", familyName: "Keller" });
  });
  after(() => platform?.stop());

  describe("errors shown at the server, never redirected", () => {
    const cases: Array<[string, Record<string, string | undefined>, RegExp]> = [
      ["no client_id", { client_id: undefined }, /client_id is required/],
      ["an unknown client_id", { client_id: "no-such-app" }, /client_id is not an application/],
      ["no redirect_uri", { redirect_uri: undefined }, /redirect_uri is required/],
      [
        "an unregistered redirect_uri",
        { redirect_uri: "https://evil.example/callback" },
        /registered redirect URIs/,
      ],
      [
        "a redirect_uri differing only in the port (not a native app)",
        { redirect_uri: "https://web.example:8443/callback" },
        /registered redirect URIs/,
      ],
      ["a malformed redirect_uri", { redirect_uri: "/callback" }, /redirect_uri is malformed/],
      [
        "a redirect_uri with a fragment",
        { redirect_uri: `${WEB_CALLBACK}#x` },
        /redirect_uri is malformed: it contains a fragment/,
      ],
    ];
    for (const [name, params, description] of cases) {
      it(`${name}: 400 page, no redirect, nothing stored`, async () => {
        const before = await authRequestCount();
        const { path } = await codeRequest(params);
        assertErrorPage(await browser().get(path), description);
        assert.equal(await authRequestCount(), before);
      });
    }

    it("a repeated client_id or redirect_uri, in a query or a form body", async () => {
      const { path } = await codeRequest();
      assertErrorPage(await browser().get(`${path}&client_id=${web.clientId}`), /client_id is repeated/);
      assertErrorPage(
        await browser().get(`${path}&redirect_uri=${encodeURIComponent(WEB_CALLBACK)}`),
        /redirect_uri is repeated/,
      );
      const posted = await browser().post("/oauth/v2/authorize?", {});
      assertErrorPage(posted, /client_id is required/);
    });

    it("is localized by ui_locales, then Accept-Language", async () => {
      const { path } = await codeRequest({ client_id: "unknown", ui_locales: "de-CH de" });
      const german = await browser().get(path);
      assert.match(german.text, /<html lang="de">/);
      assert.match(german.text, /Anmeldung nicht möglich/);
      const french = await browser().get((await codeRequest({ client_id: "unknown" })).path, {
        "accept-language": "fr-CH, fr;q=0.9",
      });
      assert.match(french.text, /<html lang="fr">/);
    });
  });

  describe("errors at the redirect URI", () => {
    it("invalid_request: a missing response_type, a repeated parameter, invalid values", async () => {
      const state = "state-1";
      const cases: Array<[Record<string, string | undefined>, RegExp]> = [
        [{ response_type: undefined }, /response_type is required/],
        [{ scope: undefined }, /scope is required/],
        [{ max_age: "soon" }, /max_age/],
        [{ prompt: "none login" }, /prompt none cannot be combined/],
        [{ prompt: "sometimes" }, /prompt "sometimes" is not supported/],
        [{ code_challenge_method: "plain" }, /S256 \(plain is not allowed\)/],
        [{ code_challenge: "short" }, /code_challenge must be/],
        [{ code_challenge: undefined }, /code_challenge_method given without code_challenge/],
        [{ login_hint: "x".repeat(401) }, /login_hint is too long/],
        [{ id_token_hint: "not.a.token" }, /id_token_hint is not a valid ID token/],
      ];
      for (const [params, description] of cases) {
        const { path } = await codeRequest({ ...params, state });
        assertRedirectError(await browser().get(path), "invalid_request", { state, description });
      }
      // repeated: the state is not echoed when it is the repeated one
      const { path } = await codeRequest({ state });
      assertRedirectError(await browser().get(`${path}&scope=openid`), "invalid_request", {
        state,
        description: /scope is repeated/,
      });
      assertRedirectError(await browser().get(`${path}&state=again`), "invalid_request", {
        description: /state is repeated/,
      });
    });

    it("invalid_request: PKCE is required for an app without client authentication (method none)", async () => {
      for (const clientId of [spa.clientId, native.clientId]) {
        const redirectUri = clientId === spa.clientId ? SPA_CALLBACK : NATIVE_CALLBACK;
        const { path } = await codeRequest({
          client_id: clientId,
          redirect_uri: redirectUri,
          code_challenge: undefined,
          code_challenge_method: undefined,
          state: "s",
        });
        assertRedirectError(await browser().get(path), "invalid_request", {
          state: "s",
          redirectUri,
          description: /code_challenge \(PKCE, S256\) is required/,
        });
      }
    });

    it("invalid_request: the implicit flow needs a nonce (the error in the fragment)", async () => {
      const { path } = await codeRequest({
        client_id: spa.clientId,
        redirect_uri: SPA_CALLBACK,
        response_type: "id_token token",
        nonce: undefined,
        state: "s",
      });
      assertRedirectError(await browser().get(path), "invalid_request", {
        state: "s",
        redirectUri: SPA_CALLBACK,
        mode: "fragment",
        description: /nonce is required/,
      });
    });

    it("invalid_scope: no openid, an unknown scope, an unknown project or organization", async () => {
      const cases: Array<[string, RegExp]> = [
        ["profile email", /must contain openid/],
        ["openid calendar", /unknown scope calendar/],
        ["openid urn:platform:iam:org:project:id:404:aud", /unknown project 404/],
        ["openid urn:platform:iam:org:id:404", /organization 404 does not exist/],
      ];
      for (const [scope, description] of cases) {
        const { path } = await codeRequest({ scope, state: "s" });
        assertRedirectError(await browser().get(path), "invalid_scope", { state: "s", description });
      }
    });

    it("unauthorized_client: a response type the app may not use", async () => {
      for (const responseType of ["id_token", "id_token token"]) {
        const { path } = await codeRequest({ response_type: responseType, state: "s" });
        assertRedirectError(await browser().get(path), "unauthorized_client", {
          state: "s",
          mode: "fragment",
          description: /may not use response_type/,
        });
      }
    });

    it("unsupported_response_type: token alone, hybrid types and anything else", async () => {
      for (const [responseType, mode] of [
        ["token", "fragment"],
        ["code id_token", "fragment"],
        ["code token", "fragment"],
        ["device_code", "query"],
      ]) {
        const { path } = await codeRequest({ response_type: responseType, state: "s" });
        assertRedirectError(await browser().get(path), "unsupported_response_type", { state: "s", mode });
      }
    });

    it("request objects are not supported; an invalid response_mode is ignored, query never carries tokens", async () => {
      const { path } = await codeRequest({ request: "eyJhbGciOiJub25lIn0.e30.", state: "s" });
      assertRedirectError(await browser().get(path), "request_not_supported", { state: "s" });
      const uri = await codeRequest({ request_uri: "https://web.example/request.jwt", state: "s" });
      assertRedirectError(await browser().get(uri.path), "request_uri_not_supported", { state: "s" });
      // response_mode=bogus: the default (query) for code
      const bogus = await codeRequest({ response_mode: "bogus", response_type: "token", state: "s" });
      assertRedirectError(await browser().get(bogus.path), "unsupported_response_type", {
        state: "s",
        mode: "fragment",
      });
      const implicit = await codeRequest({
        client_id: spa.clientId,
        redirect_uri: SPA_CALLBACK,
        response_type: "id_token",
        response_mode: "query",
        nonce: undefined,
        state: "s",
      });
      assertRedirectError(await browser().get(implicit.path), "invalid_request", {
        state: "s",
        redirectUri: SPA_CALLBACK,
        mode: "fragment",
      });
    });

    it("login_required (prompt=none without a session) and the form_post error page", async () => {
      const { path } = await codeRequest({ prompt: "none", state: "s" });
      const before = await authRequestCount();
      assertRedirectError(await browser().get(path), "login_required", { state: "s" });
      const posted = await browser().get(
        (await codeRequest({ prompt: "none", response_mode: "form_post", state: "s" })).path,
      );
      assertRedirectError(posted, "login_required", { state: "s", mode: "form_post" });
      assert.equal(await authRequestCount(), before, "prompt=none stores no request");
    });

    it("access_denied: the project's role check refuses a person without a role, until one is granted", async () => {
      const rest = restClient(platform, () => owner);
      const projectId = await createProject(platform, owner, "Checked", { project_role_check: true });
      assert.equal(
        (
          await rest("POST", `/resources/v3alpha/projects/${projectId}/roles`, {
            json: { key: "user", display_name: "User" },
          })
        ).status,
        201,
      );
      const checked = await createOidcApp(platform, owner, projectId, "checked", {
        redirect_uris: [WEB_CALLBACK],
        auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
      });
      const b = browser();
      const request = await codeRequest({ client_id: checked.clientId, state: "s" });
      const refused = await signInThroughUi(b, request.path, "alice", PASSWORD);
      assertRedirectError(refused, "access_denied", {
        state: "s",
        description: /no role in the application's project/,
      });
      const granted = await rest("POST", "/resources/v3alpha/user_grants", {
        json: { user_id: aliceId, project_id: projectId, role_keys: ["user"] },
      });
      assert.equal(granted.status, 201, granted.text);
      const again = await b.get((await codeRequest({ client_id: checked.clientId })).path);
      assert.match(responseParams(again).params.get("code") ?? "", /\S/);
    });

    it("server_error: an unexpected condition reaches the client at its redirect URI", async () => {
      const b = browser();
      await signIn(b, "alice");
      const original = platform.oidc.tokens.insertCode;
      platform.oidc.tokens.insertCode = async () => {
        throw new Error("disk on fire");
      };
      try {
        const { path } = await codeRequest({ state: "s" });
        assertRedirectError(await b.get(path), "server_error", { state: "s" });
      } finally {
        platform.oidc.tokens.insertCode = original;
      }
    });
  });

  describe("sign-in", () => {
    it("code + PKCE through the login UI: tokens verified by openid-client; a stored request lives 10 minutes", async () => {
      const b = browser();
      const request = await codeRequest({ login_hint: "alice" });
      const entry = await b.get(request.path);
      assert.equal(entry.status, 302);
      assert.match(entry.location ?? "", /^\/ui\/login\?authRequest=[\w-]+$/);
      const id = new URL(entry.location!, platform.url).searchParams.get("authRequest");
      const [row] = await platform.db.query<{ life: number }>(
        "SELECT extract(epoch FROM expires_at - created_at)::int AS life FROM auth_requests WHERE id = $1",
        [id],
      );
      assert.equal(Number(row.life), 600);
      const loginPage = await b.follow(entry.location!);
      assert.match(loginPage.text, /value="alice"/, "login_hint prefills the login name");
      const answer = await signInThroughUi(b, request.path, "alice", PASSWORD);
      const { params } = responseParams(answer);
      assert.equal(params.get("iss"), platform.url);
      assert.equal(params.get("state"), request.params.state);
      const tokens = await redeem(answer, request);
      const claims = tokens.claims()!;
      assert.equal(claims.sub, aliceId);
      assert.equal(claims.nonce, request.params.nonce);
      assert.deepEqual(claims.amr, ["pwd"]);
      assert.ok(typeof claims.sid === "string" && typeof claims.auth_time === "number");
      assert.ok(tokens.refresh_token, "offline_access: a refresh token");
      const info = await client.fetchUserInfo(webConfig, tokens.access_token, aliceId);
      assert.equal(info.email, "alice@example.com");
    });

    it("a second authorization reuses the session without a page; prompt=none too; POST works as GET", async () => {
      const b = browser();
      const first = await signIn(b, "alice");
      const second = await codeRequest();
      const answer = await b.get(second.path);
      assert.match(answer.location ?? "", /^https:\/\/web\.example\/callback\?code=/, "straight back");
      const tokens = await redeem(answer, second);
      assert.equal(tokens.claims()!.sid, first.claims()!.sid);
      assert.equal(tokens.claims()!.auth_time, first.claims()!.auth_time);

      const silent = await codeRequest({ prompt: "none" });
      const silentAnswer = await b.get(silent.path);
      assert.equal(silentAnswer.status, 302);
      assert.equal((await redeem(silentAnswer, silent)).claims()!.sub, aliceId);

      const posted = await codeRequest();
      const postAnswer = await b.post("/oauth/v2/authorize", posted.params as Record<string, string>);
      assert.equal(postAnswer.status, 303, "303 after a POST");
      assert.equal((await redeem(postAnswer, posted)).claims()!.sub, aliceId);
      // a POST without the cookie (cross-site): the login UI decides, with the cookie
      const crossSite = await codeRequest({ prompt: "none" });
      const withoutCookie = await browser().post(
        "/oauth/v2/authorize",
        crossSite.params as Record<string, string>,
      );
      assert.equal(withoutCookie.status, 303);
      assert.match(withoutCookie.location ?? "", /^\/ui\/login\?authRequest=/);
      const viaUi = await b.follow(withoutCookie.location!);
      assert.equal((await redeem(viaUi, crossSite)).claims()!.sub, aliceId);
      // a repeated parameter in a form body
      const body = `${new URLSearchParams(posted.params as Record<string, string>)}&nonce=again`;
      const repeated = await fetch(`${platform.url}/oauth/v2/authorize`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body,
        redirect: "manual",
      });
      assert.equal(repeated.status, 303);
      const error = new URL(repeated.headers.get("location")!);
      assert.equal(error.searchParams.get("error"), "invalid_request");
      assert.match(error.searchParams.get("error_description")!, /nonce is repeated/);
    });

    it("prompt=login and max_age ask for the password again: a new auth_time", async () => {
      const b = browser();
      const first = await signIn(b, "bob");
      await new Promise((resolve) => setTimeout(resolve, 1100)); // auth_time has whole seconds
      for (const extra of [{ prompt: "login" }, { max_age: "0" }]) {
        const request = await codeRequest(extra);
        const page = await b.follow(request.path);
        assert.match(page.text, /For your security, please enter your password again/);
        const answer = await b.submit(page, "/ui/login/password", { password: PASSWORD });
        const claims = (await redeem(answer, request)).claims()!;
        assert.equal(claims.sid, first.claims()!.sid, "the same session");
        assert.ok(
          (claims.auth_time as number) > (first.claims()!.auth_time as number),
          "auth_time of the new password check",
        );
      }
      // prompt=none cannot ask: login_required
      const silent = await codeRequest({ prompt: "none", max_age: "0", state: "s" });
      assertRedirectError(await b.get(silent.path), "login_required", { state: "s" });
    });

    it("two sessions: the picker, prompt=none answers interaction_required, id_token_hint selects its session", async () => {
      const b = browser();
      await signIn(b, "alice");
      const request = await codeRequest({ prompt: "login" });
      const page = await b.follow(request.path);
      const other = await b.follow(
        "/ui/login/loginname?authRequest=" + /authRequest=([\w-]+)/.exec(page.text)![1],
      );
      const bobPassword = await b.submit(other, "/ui/login/loginname", { loginName: "bob" });
      const bobTokens = await redeem(
        await b.submit(bobPassword, "/ui/login/password", { password: PASSWORD }),
        request,
      );
      assert.equal(bobTokens.claims()!.sub, bobId);

      const picker = await codeRequest();
      assert.match((await b.follow(picker.path)).text, /Choose an account/);
      const silent = await codeRequest({ prompt: "none", state: "s" });
      assertRedirectError(await b.get(silent.path), "interaction_required", { state: "s" });
      const hinted = await codeRequest({ prompt: "none", id_token_hint: bobTokens.id_token });
      const answer = await b.get(hinted.path);
      assert.equal((await redeem(answer, hinted)).claims()!.sub, bobId);
      // login_hint narrows the sessions to that person's
      const byName = await codeRequest({ prompt: "none", login_hint: "alice" });
      assert.equal((await redeem(await b.get(byName.path), byName)).claims()!.sub, aliceId);
    });

    it("a native app's loopback redirect URI matches whatever its port; other parts must be equal", async () => {
      const request = await codeRequest({
        client_id: native.clientId,
        redirect_uri: "http://127.0.0.1:51234/callback",
      });
      const answer = await browser().get(request.path);
      assert.equal(answer.status, 302);
      assert.match(answer.location ?? "", /^\/ui\/login\?authRequest=/);
      for (const redirectUri of ["http://127.0.0.1:51234/other", "http://localhost:51234/callback"]) {
        const bad = await codeRequest({ client_id: native.clientId, redirect_uri: redirectUri });
        assertErrorPage(await browser().get(bad.path), /registered redirect URIs/);
      }
      // and the code is redeemed with that exact URI
      const b = browser();
      const verifier = client.randomPKCECodeVerifier();
      const path = authorizePath({
        client_id: native.clientId,
        redirect_uri: "http://127.0.0.1:51234/callback",
        response_type: "code",
        scope: "openid",
        code_challenge: await client.calculatePKCECodeChallenge(verifier),
        code_challenge_method: "S256",
      });
      const done = await signInThroughUi(b, path, "alice", PASSWORD);
      const config = await discover(platform.url, native.clientId, client.None());
      const tokens = await client.authorizationCodeGrant(config, new URL(done.location!), {
        pkceCodeVerifier: verifier,
        idTokenExpected: true,
      });
      assert.equal(tokens.claims()!.sub, aliceId);
    });

    it("form_post: an auto-submitting form under a CSP allowing exactly its script and the client", async () => {
      const b = browser();
      await signIn(b, "alice");
      const request = await codeRequest({ response_mode: "form_post" });
      const page = await b.get(request.path);
      assert.equal(page.status, 200);
      const csp = page.headers.get("content-security-policy") ?? "";
      assert.match(csp, /script-src 'sha256-[A-Za-z0-9+/=]+'(;|$)/);
      assert.match(csp, /form-action 'self' https:\/\/web\.example(;|$)/);
      assert.match(csp, /frame-ancestors 'none'/);
      assert.match(page.text, /<button class="button" type="submit">Continue<\/button>/);
      const { params } = responseParams(page);
      assert.equal(params.get("state"), request.params.state);
      assert.equal(params.get("iss"), platform.url);
      // what the client receives in the post body, redeemed
      const url = new URL(WEB_CALLBACK);
      for (const [key, value] of params) url.searchParams.set(key, value);
      const tokens = await client.authorizationCodeGrant(webConfig, url, {
        pkceCodeVerifier: request.verifier,
        expectedState: request.params.state,
        expectedNonce: request.params.nonce,
      });
      assert.equal(tokens.claims()!.sub, aliceId);
    });

    it("code replay: invalid_grant, and the first tokens become inactive; refresh rotates and detects reuse", async () => {
      const b = browser();
      await signIn(b, "alice");
      const request = await codeRequest();
      const answer = await b.get(request.path);
      const tokens = await redeem(answer, request);
      assert.equal((await client.tokenIntrospection(webConfig, tokens.access_token)).active, true);
      await assert.rejects(
        redeem(answer, request),
        (e: client.ResponseBodyError) => e.error === "invalid_grant",
      );
      assert.equal((await client.tokenIntrospection(webConfig, tokens.access_token)).active, false);

      const again = await codeRequest();
      const fresh = await redeem(await b.get(again.path), again);
      const rotated = await client.refreshTokenGrant(webConfig, fresh.refresh_token!);
      assert.notEqual(rotated.refresh_token, fresh.refresh_token, "a new refresh token");
      assert.equal(rotated.claims()!.sub, aliceId);
      await assert.rejects(
        client.refreshTokenGrant(webConfig, fresh.refresh_token!),
        (e: client.ResponseBodyError) => e.error === "invalid_grant",
      );
      // reuse revoked the family: the rotated tokens too
      assert.equal((await client.tokenIntrospection(webConfig, rotated.access_token)).active, false);
      await assert.rejects(
        client.refreshTokenGrant(webConfig, rotated.refresh_token!),
        (e: client.ResponseBodyError) => e.error === "invalid_grant",
      );
    });
  });

  describe("implicit flow", () => {
    const jwks = () => createRemoteJWKSet(new URL(`${platform.url}/oauth/v2/keys`));
    const implicitPath = (responseType: string, nonce: string, extra: Record<string, string> = {}) =>
      authorizePath({
        client_id: spa.clientId,
        redirect_uri: SPA_CALLBACK,
        response_type: responseType,
        scope: "openid profile email",
        nonce,
        state: "implicit-state",
        ...extra,
      });

    it("id_token: in the fragment, with the nonce and the claims of the requested scopes", async () => {
      const b = browser();
      const nonce = client.randomNonce();
      const answer = await signInThroughUi(b, implicitPath("id_token", nonce), "alice", PASSWORD);
      const { params, mode } = responseParams(answer);
      assert.equal(mode, "fragment");
      assert.equal(params.get("state"), "implicit-state");
      assert.equal(params.get("iss"), platform.url);
      assert.equal(params.get("access_token"), null, "no access token");
      // openid-client's implicit authentication verifies it (signature, iss, aud, nonce)
      const config = await discover(platform.url, spa.clientId, client.None());
      client.useIdTokenResponseType(config);
      const claims = await client.implicitAuthentication(config, new URL(answer.location!), nonce, {
        expectedState: "implicit-state",
      });
      assert.equal(claims.sub, aliceId);
      assert.equal(claims.email, "alice@example.com");
      assert.equal(claims.name, "Alice Martin");
      assert.equal(claims.at_hash, undefined);
    });

    it("id_token token: at_hash binds the access token; the user claims come from userinfo", async () => {
      const b = browser();
      const nonce = client.randomNonce();
      await signInThroughUi(b, implicitPath("id_token", nonce), "bob", PASSWORD);
      const second = await b.get(implicitPath("id_token token", nonce, { response_mode: "fragment" }));
      const { params } = responseParams(second);
      const accessToken = params.get("access_token")!;
      assert.ok(accessToken);
      assert.equal(params.get("token_type"), "Bearer");
      assert.ok(Number(params.get("expires_in")) > 0);
      assert.equal(params.get("scope"), "openid profile email");
      const { payload } = await jwtVerify(params.get("id_token")!, jwks(), {
        issuer: platform.url,
        audience: spa.clientId,
      });
      assert.equal(payload.nonce, nonce);
      assert.equal(payload.sub, bobId);
      assert.equal(payload.at_hash, halfHash(accessToken));
      assert.equal(payload.email, undefined, "profile and email come from userinfo");
      const info = await fetch(`${platform.url}/oidc/v1/userinfo`, {
        headers: { authorization: `Bearer ${accessToken}` },
      });
      assert.equal(((await info.json()) as { email: string }).email, "bob@example.com");
      // form_post works for the implicit flow too
      const posted = await b.get(implicitPath("id_token", nonce, { response_mode: "form_post" }));
      assert.equal(responseParams(posted).mode, "form_post");
      assert.equal(decodeJwt(responseParams(posted).params.get("id_token")!).sub, bobId);
    });
  });

  describe("end session", () => {
    it("ends the session with id_token_hint, revokes its tokens and redirects with state; prompt=none then answers login_required", async () => {
      const b = browser();
      const tokens = await signIn(b, "alice");
      const ended = await b.get(
        `/oidc/v1/end_session?${new URLSearchParams({
          id_token_hint: tokens.id_token!,
          post_logout_redirect_uri: WEB_SIGNED_OUT,
          state: "bye",
        })}`,
      );
      assert.equal(ended.status, 302);
      assert.equal(ended.location, `${WEB_SIGNED_OUT}?state=bye`);
      assert.equal((await client.tokenIntrospection(webConfig, tokens.access_token)).active, false);
      await assert.rejects(
        client.refreshTokenGrant(webConfig, tokens.refresh_token!),
        (e: client.ResponseBodyError) => e.error === "invalid_grant",
      );
      const silent = await codeRequest({ prompt: "none", state: "s" });
      assertRedirectError(await b.get(silent.path), "login_required", { state: "s" });
    });

    /** Whether `b`'s session still signs in without a page (prompt=none answers a code). */
    const stillSignedIn = async (b: HttpBrowser) => {
      const silent = await codeRequest({ prompt: "none" });
      return /\?code=/.test((await b.get(silent.path)).location ?? "");
    };

    /** The confirmation page: 200, HTML, not framable, posting back to end_session, nothing redirected. */
    const assertConfirmation = (answer: Answer, accounts: string[]) => {
      assert.equal(answer.status, 200, answer.text.slice(0, 300));
      assert.equal(answer.location, undefined, "no redirect");
      assert.match(answer.headers.get("content-type") ?? "", /^text\/html/);
      assert.equal(answer.headers.get("x-frame-options"), "DENY");
      assert.match(answer.headers.get("content-security-policy") ?? "", /frame-ancestors 'none'/);
      assert.match(answer.text, /<h1 id="page-title">Sign out of Platform\?<\/h1>/);
      assert.match(answer.text, /<form method="post" action="\/oidc\/v1\/end_session">/);
      const listed = [...answer.text.matchAll(/<span class="account-name">([^<]*)<\/span>/g)].map(
        (m) => m[1],
      );
      assert.deepEqual(listed.sort(), [...accounts].sort());
    };

    it("without a hint a GET ends nothing and asks first; confirming ends every session, revokes their tokens and redirects with state", async () => {
      const b = browser();
      const tokens = await signIn(b, "bob");
      const params = { client_id: web.clientId, post_logout_redirect_uri: WEB_SIGNED_OUT, state: "bye" };
      const asked = await b.get(`/oidc/v1/end_session?${new URLSearchParams(params)}`);
      assertConfirmation(asked, ["Bob Keller"]);
      // the post and the redirect after it may go to the application (form-action); Cancel leads there too
      assert.match(
        asked.headers.get("content-security-policy") ?? "",
        /form-action 'self' https:\/\/web\.example/,
      );
      assert.match(
        asked.text,
        /<a class="button button-secondary" href="https:\/\/web\.example\/signed-out\?state=bye">Cancel<\/a>/,
      );
      // the form posts the request back with the browser's CSRF token
      const { csrf, ...posted } = formOf(asked.text, "/oidc/v1/end_session");
      assert.deepEqual(posted, params);
      assert.match(csrf, /^[\w-]{43}$/);
      // nothing ended: the tokens are active, the refresh token works, the session signs in
      assert.equal((await client.tokenIntrospection(webConfig, tokens.access_token)).active, true);
      const refreshed = await client.refreshTokenGrant(webConfig, tokens.refresh_token!);
      assert.ok(await stillSignedIn(b), "still signed in after the GET");

      const confirmed = await b.submit(asked, "/oidc/v1/end_session", {});
      assert.equal(confirmed.location, `${WEB_SIGNED_OUT}?state=bye`);
      assert.equal(b.cookies.size, 0, "every session ended: the cookie is cleared");
      assert.equal((await client.tokenIntrospection(webConfig, refreshed.access_token)).active, false);
      const silent = await codeRequest({ prompt: "none", state: "s" });
      assertRedirectError(await b.get(silent.path), "login_required", { state: "s" });
    });

    it("without a client the URI is ignored and the signed-out page shown; with nothing signed in, no question; POST", async () => {
      const b = browser();
      await signIn(b, "bob");
      const asked = await b.get(
        `/oidc/v1/end_session?${new URLSearchParams({ post_logout_redirect_uri: WEB_SIGNED_OUT })}`,
      );
      assertConfirmation(asked, ["Bob Keller"]);
      assert.match(asked.text, /<a class="button button-secondary" href="\/">Cancel<\/a>/);
      const ignored = await b.submit(asked, "/oidc/v1/end_session", {});
      assert.match(ignored.text, /You are signed out/);
      assert.match(ignored.text, /Every account in this browser is signed out/);

      // nothing to sign out: straight on, nothing asked
      const nothing = await b.get(
        `/oidc/v1/end_session?${new URLSearchParams({ client_id: web.clientId, post_logout_redirect_uri: WEB_SIGNED_OUT })}`,
      );
      assert.equal(nothing.status, 302);
      assert.equal(nothing.location, WEB_SIGNED_OUT);

      const tokens = await signIn(b, "bob");
      const posted = await b.post("/oidc/v1/end_session", { id_token_hint: tokens.id_token! });
      assert.equal(posted.status, 303);
      assert.equal(posted.location, "/ui/login/signedout");
      // a cross-site POST carries no cookie: it continues as a GET, which does (a token is not carried over)
      const crossSite = await browser().post("/oidc/v1/end_session", {
        client_id: web.clientId,
        state: "x",
        csrf: "anything",
      });
      assert.equal(crossSite.status, 303);
      assert.equal(
        crossSite.location,
        `/oidc/v1/end_session?client_id=${encodeURIComponent(web.clientId)}&state=x`,
      );
    });

    it("a POST without this browser's CSRF token ends nothing: without one it asks, with a wrong one it is refused (403)", async () => {
      const b = browser();
      const tokens = await signIn(b, "alice");
      const other = browser();
      await signIn(other, "bob");
      const othersPage = await other.get(
        `/oidc/v1/end_session?client_id=${encodeURIComponent(web.clientId)}`,
      );
      const othersToken = formOf(othersPage.text, "/oidc/v1/end_session").csrf;
      assert.ok(othersToken);

      // an application's POST (or another page's, with the cookie): asked, nothing ended
      const asked = await b.post("/oidc/v1/end_session", { client_id: web.clientId, state: "x" });
      assertConfirmation(asked, ["Alice Martin"]);
      for (const csrf of ["forged", othersToken, `${othersToken}x`]) {
        const refused = await b.post("/oidc/v1/end_session", { client_id: web.clientId, csrf });
        assert.equal(refused.status, 403, refused.text.slice(0, 300));
        assert.equal(refused.location, undefined);
        assert.match(refused.text, /Sign-out not possible/);
        assert.match(refused.text, /This form has expired or was sent from another site/);
      }
      // a GET never confirms, whatever it carries
      const viaGet = await b.get(
        `/oidc/v1/end_session?${new URLSearchParams({ client_id: web.clientId, csrf: formOf(asked.text, "/oidc/v1/end_session").csrf })}`,
      );
      assertConfirmation(viaGet, ["Alice Martin"]);
      assert.equal((await client.tokenIntrospection(webConfig, tokens.access_token)).active, true);
      assert.ok(await stillSignedIn(b), "alice is still signed in");
      assert.ok(await stillSignedIn(other), "bob is still signed in");
    });

    it("a valid hint whose session is not one of this browser's asks first, and then ends only its user's sessions", async () => {
      const first = browser();
      const earlier = await signIn(first, "alice");
      const b = browser();
      const alice = await signIn(b, "alice");
      // bob signs in beside alice in b
      const request = await codeRequest({ prompt: "select_account" });
      const picker = await b.follow(request.path);
      const id = /authRequest=([\w-]+)/.exec(picker.text)![1];
      const loginName = await b.follow(`/ui/login/loginname?authRequest=${id}`);
      const pw = await b.submit(loginName, "/ui/login/loginname", { loginName: "bob" });
      const bob = await redeem(await b.submit(pw, "/ui/login/password", { password: PASSWORD }), request);

      // alice's ID token of the first browser: signed by us, but not of a session of b
      const params = {
        id_token_hint: earlier.id_token!,
        post_logout_redirect_uri: WEB_SIGNED_OUT,
        state: "s",
      };
      const asked = await b.get(`/oidc/v1/end_session?${new URLSearchParams(params)}`);
      assertConfirmation(asked, ["Alice Martin"]);
      assert.equal((await client.tokenIntrospection(webConfig, alice.access_token)).active, true);
      const confirmed = await b.submit(asked, "/oidc/v1/end_session", {});
      assert.equal(confirmed.location, `${WEB_SIGNED_OUT}?state=s`);
      assert.equal((await client.tokenIntrospection(webConfig, alice.access_token)).active, false);
      assert.equal((await client.tokenIntrospection(webConfig, bob.access_token)).active, true);
      assert.equal(
        (await client.tokenIntrospection(webConfig, earlier.access_token)).active,
        true,
        "the first browser's session stays",
      );
      assert.ok(await stillSignedIn(first));

      // a browser without sessions of the hint's user: nothing to end, nothing asked
      const fresh = await browser().get(`/oidc/v1/end_session?${new URLSearchParams(params)}`);
      assert.equal(fresh.status, 302);
      assert.equal(fresh.location, `${WEB_SIGNED_OUT}?state=s`);
      assert.equal((await client.tokenIntrospection(webConfig, earlier.access_token)).active, true);
    });

    it("bad requests end nothing and show a page: another client than the hint's, an unregistered URI, a bad hint", async () => {
      const b = browser();
      const tokens = await signIn(b, "alice");
      const cases: Array<[Record<string, string>, RegExp]> = [
        [{ id_token_hint: tokens.id_token!, client_id: spa.clientId }, /client_id differs/],
        [{ client_id: web.clientId, post_logout_redirect_uri: "https://evil.example/" }, /post-logout/],
        [{ id_token_hint: "e30.e30.e30" }, /id_token_hint is not a valid ID token/],
        [{ client_id: "no-such-app" }, /client_id is not an application/],
      ];
      for (const [params, description] of cases) {
        const answer = await b.get(`/oidc/v1/end_session?${new URLSearchParams(params)}`);
        assertErrorPage(answer, description);
        assert.match(answer.text, /Sign-out not possible/);
      }
      assert.equal((await client.tokenIntrospection(webConfig, tokens.access_token)).active, true);
      const silent = await codeRequest({ prompt: "none" });
      assert.match((await b.get(silent.path)).location ?? "", /\?code=/, "still signed in");
    });

    it("with a hint, only that person's sessions of the browser end", async () => {
      const b = browser();
      const alice = await signIn(b, "alice");
      const request = await codeRequest({ prompt: "select_account" });
      const picker = await b.follow(request.path);
      const id = /authRequest=([\w-]+)/.exec(picker.text)![1];
      const other = await b.follow(`/ui/login/loginname?authRequest=${id}`);
      const pw = await b.submit(other, "/ui/login/loginname", { loginName: "bob" });
      const bob = await redeem(await b.submit(pw, "/ui/login/password", { password: PASSWORD }), request);
      const ended = await b.get(
        `/oidc/v1/end_session?${new URLSearchParams({ id_token_hint: alice.id_token! })}`,
      );
      assert.equal(ended.location, "/ui/login/signedout", "at once, nothing asked");
      assert.match((await b.follow(ended.location!)).text, /Other accounts stay signed in on this browser/);
      assert.equal((await client.tokenIntrospection(webConfig, alice.access_token)).active, false);
      assert.equal((await client.tokenIntrospection(webConfig, bob.access_token)).active, true);
      const silent = await codeRequest({ prompt: "none" });
      assert.equal((await redeem(await b.get(silent.path), silent)).claims()!.sub, bobId);
    });
  });
});
