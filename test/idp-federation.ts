/**
 * A Platform signing people in through a real external OpenID Connect provider, shared by the browser test
 * of identity providers (test/idp-browser.test.ts) and `npm run screenshots`. The external provider is a
 * second Platform instance on the same server (domain 127.0.0.1, its own issuer, users and login UI) with
 * an OIDC app registered there through the apps API. The Platform under test (localhost) signs people in
 * for its own application "shop", offering "Continue with <provider>". The server listens on a port chosen
 * beforehand so that PLATFORM_IDP_CODEHOST_B_ISSUER can name the second instance's issuer; the second
 * instance is also at 127.0.0.2, an address PLATFORM_EXECUTION_DENY_LIST closes to the Platform. The
 * providers belong to an organization and the upstream is on loopback, so the Platform runs with
 * PLATFORM_OUTBOUND_ALLOW_PRIVATE=all (src/net/outbound.test.ts covers the default policy).
 */
import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import { hashPassword } from "../src/crypto/password.ts";
import { randomToken, sha256 } from "../src/crypto/tokens.ts";
import { createInstance } from "../src/domain/instance/commands.ts";
import { addHumanEvent } from "../src/domain/user/commands.ts";
import { newId } from "../src/id.ts";
import { authorizePath, createOidcApp, createProject } from "./authorize.ts";
import { type RestCall, restClient, startPlatform, type TestPlatform, testTime } from "./helpers.ts";
import { type ClientApp, PASSWORD } from "./login-browser.ts";
import { client, discover, ownerToken } from "./oidc.ts";
import { freePort } from "./process.ts";

/** The external provider: the second instance. */
export interface Upstream {
  url: string;
  pat: string;
  instanceId: string;
  orgId: string;
  clientId: string;
  clientSecret: string;
}

export type ProviderOptions = Partial<{
  isManualLinkingAllowed: boolean;
  isManualCreationAllowed: boolean;
  isAutoCreation: boolean;
  isAutoUpdate: boolean;
  autoLinking: "unspecified" | "username" | "email";
}>;

/** An authorization request of the shop, and the redemption of its code once back at the shop. */
export interface ShopAuthorization {
  url: string;
  /** Back at the shop: redeems the code and answers the ID token's claims and the userinfo. */
  redeem(page: Page): Promise<{ claims: client.IDToken; userinfo: client.UserInfoResponse }>;
}

export interface Federation {
  /** The Platform under test (`url`: http://localhost:<port>). */
  platform: TestPlatform;
  /** A PAT of the Platform under test's owner. */
  owner: string;
  /** The default organization of the Platform under test. */
  orgId: string;
  upstream: Upstream;
  shop: { clientId: string; config: client.Configuration };
  /** The REST client of the Platform under test, as its owner. */
  rest: RestCall;
  /**
   * A person at the external provider (a human of the second instance; its e-mail address verified unless
   * `emailVerified` is false); answers the user ID there.
   */
  addUpstreamHuman(
    username: string,
    profile: { givenName: string; familyName: string; email?: string; emailVerified?: boolean },
  ): Promise<string>;
  /**
   * An identity provider of the Platform under test for the second instance's app, made through the
   * identity providers API (in the default organization unless `ctx` says otherwise); answers its ID.
   */
  addProvider(
    name: string,
    options: ProviderOptions,
    extra?: { type?: "oidc" | "codehost_b" | "oauth"; ctx?: string },
  ): Promise<string>;
  /** An authorization request of the shop with PKCE, state and nonce (`scope` added to the default scopes). */
  authorization(scope?: string): Promise<ShopAuthorization>;
  /** Signs in at the external provider's login UI (the second instance). */
  signInUpstream(page: Page, loginName: string): Promise<void>;
}

/** Starts the Platform under test with the external provider; `app` is the shop's redirect target. */
export async function startFederation(app: ClientApp): Promise<Federation> {
  const port = await freePort();
  const upstream: Upstream = {
    url: `http://127.0.0.1:${port}`,
    pat: "",
    instanceId: "",
    orgId: "",
    clientId: "",
    clientSecret: "",
  };
  const platform = await startPlatform({
    listen: true,
    env: {
      PLATFORM_PORT: String(port),
      PLATFORM_IDP_CODEHOST_B_ISSUER: upstream.url,
      // the providers are organizations' and the upstream is on loopback, which only `all` opens to them
      PLATFORM_OUTBOUND_ALLOW_PRIVATE: "all",
      // the upstream instance is also at 127.0.0.2 (loopback too), which the operator closed
      PLATFORM_EXECUTION_DENY_LIST: "127.0.0.2",
    },
  });
  const orgId = platform.bootstrapResult!.orgId;
  const owner = await ownerToken(platform);
  const rest = restClient(platform, () => owner);

  // the external provider: a second instance with its own issuer and an app for the Platform under test
  upstream.pat = randomToken();
  const second = await createInstance(platform.eventStore, "test", {
    name: "Upstream",
    domains: ["127.0.0.1", "127.0.0.2"],
    orgName: "Upstream",
    admin: { username: "upstream-admin", passwordHash: "x", passwordChangeRequired: false },
    machine: { username: "upstream-owner", patHash: sha256(upstream.pat) },
  });
  upstream.instanceId = second.instanceId;
  upstream.orgId = second.orgId;
  const upstreamApi = { ...platform, url: upstream.url } as TestPlatform;
  const projectId = await createProject(upstreamApi, upstream.pat, "Federation");
  const registered = await createOidcApp(upstreamApi, upstream.pat, projectId, "platform-under-test", {
    redirect_uris: [`${platform.url}/ui/login/idp/callback`],
    response_types: ["OIDC_RESPONSE_TYPE_CODE"],
    grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE"],
    app_type: "OIDC_APP_TYPE_WEB",
    auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
    dev_mode: true,
  });
  upstream.clientId = registered.clientId;
  upstream.clientSecret = registered.clientSecret!;

  // the application people sign in to
  const shopProject = await createProject(platform, owner, "Shop");
  const created = await createOidcApp(platform, owner, shopProject, "shop", {
    redirect_uris: [app.callback],
    response_types: ["OIDC_RESPONSE_TYPE_CODE"],
    grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE"],
    app_type: "OIDC_APP_TYPE_WEB",
    auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
  });
  const shop = {
    clientId: created.clientId,
    config: await discover(platform.url, created.clientId, client.ClientSecretBasic(created.clientSecret!)),
  };

  async function addUpstreamHuman(
    username: string,
    profile: { givenName: string; familyName: string; email?: string; emailVerified?: boolean },
  ): Promise<string> {
    const userId = newId();
    await platform.eventStore.push({ instanceId: upstream.instanceId, creator: "test" }, async () => [
      addHumanEvent(userId, upstream.orgId, {
        username,
        profile: {
          given_name: profile.givenName,
          family_name: profile.familyName,
          display_name: `${profile.givenName} ${profile.familyName}`,
        },
        email: {
          address: profile.email ?? `${username}@upstream.test`,
          is_verified: profile.emailVerified ?? true,
        },
        password_hash: await hashPassword(PASSWORD),
      }),
    ]);
    return userId;
  }

  async function addProvider(
    name: string,
    options: ProviderOptions,
    extra: { type?: "oidc" | "codehost_b" | "oauth"; ctx?: string } = {},
  ): Promise<string> {
    const type = extra.type ?? "oidc";
    const config: Record<string, unknown> = {
      client_id: upstream.clientId,
      client_secret: upstream.clientSecret,
      scopes: ["openid", "profile", "email"],
    };
    if (type === "oidc") config.issuer = upstream.url;
    if (type === "oauth") {
      config.authorization_endpoint = `${upstream.url}/oauth/v2/authorize`;
      config.token_endpoint = `${upstream.url}/oauth/v2/token`;
      config.user_endpoint = `${upstream.url}/oidc/v1/userinfo`;
      config.id_attribute = "sub";
    }
    const created = await rest(
      "POST",
      `/resources/v3alpha/idps/${type}${extra.ctx ?? `?ctx.org_id=${orgId}`}`,
      {
        json: {
          idp: {
            name,
            options: {
              is_manual_linking_allowed: options.isManualLinkingAllowed ?? false,
              is_manual_creation_allowed: options.isManualCreationAllowed ?? false,
              is_auto_creation: options.isAutoCreation ?? false,
              is_auto_update: options.isAutoUpdate ?? false,
              auto_linking: `AUTO_LINKING_OPTION_${(options.autoLinking ?? "unspecified").toUpperCase()}`,
            },
          },
          config,
        },
      },
    );
    assert.equal(created.status, 201, created.text);
    return created.json.details.id;
  }

  async function authorization(scope = ""): Promise<ShopAuthorization> {
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const path = authorizePath({
      client_id: shop.clientId,
      redirect_uri: app.callback,
      response_type: "code",
      scope: `openid profile email${scope ? ` ${scope}` : ""}`,
      state,
      nonce,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
    });
    return {
      url: `${platform.url}${path}`,
      redeem: async (page: Page) => {
        await page.waitForURL(`${app.callback}?**`, { timeout: testTime(15_000) }).catch(async (error) => {
          throw new Error(
            `not back at the shop: ${page.url()}\n${await page
              .locator("main")
              .textContent()
              .catch(() => "")}`,
            {
              cause: error,
            },
          );
        });
        const tokens = await client.authorizationCodeGrant(shop.config, new URL(page.url()), {
          pkceCodeVerifier: verifier,
          expectedState: state,
          expectedNonce: nonce,
          idTokenExpected: true,
        });
        const sub = tokens.claims()!.sub;
        return {
          claims: tokens.claims()!,
          userinfo: await client.fetchUserInfo(shop.config, tokens.access_token, sub),
        };
      },
    };
  }

  async function signInUpstream(page: Page, loginName: string) {
    await page.waitForURL(`${upstream.url}/ui/login**`);
    await page.getByLabel("Login name").fill(loginName);
    await page.getByRole("button", { name: "Next" }).click();
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
  }

  return {
    platform,
    owner,
    orgId,
    upstream,
    shop,
    rest,
    addUpstreamHuman,
    addProvider,
    authorization,
    signInUpstream,
  };
}
