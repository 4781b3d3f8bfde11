/**
 * The demo relying party: a tiny web application that signs in with Platform (authorization code flow
 * with PKCE, through openid-client) and shows the ID token's claims and the userinfo answer. For
 * newcomers, the docs and the end-to-end test (test/oidc-browser.test.ts). `npm run demo` starts it
 * (./main.ts); `startDemo` is what the test uses.
 *
 * On its first run against a Platform it creates its OIDC app through the apps API with an
 * administrator's personal access token (project "Demo", app "Demo relying party": a web app,
 * client_secret_basic, redirect URI `<demo>/callback`, post-logout URI `<demo>/`) and keeps the client ID
 * and secret in a local file (mode 0600), so later runs need no token.
 *
 * Everything a sign-in needs between the redirects (state, nonce, PKCE verifier) and the signed-in
 * sessions is kept in memory, keyed by a random HttpOnly cookie: restarting the demo signs everyone out.
 */
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import * as client from "openid-client";

export interface DemoOptions {
  /** The Platform instance's URL, also its issuer (e.g. http://localhost:8080). */
  platformUrl: string;
  /** Port of the demo (0: any free one); it listens on localhost. */
  port: number;
  /** Where the client ID and secret are kept between runs. */
  stateFile: string;
  /** An IAM_OWNER's personal access token: needed only when the app must be created. */
  pat?: string;
}

export interface Demo {
  /** `http://localhost:<port>` */
  url: string;
  clientId: string;
  close(): Promise<void>;
}

interface StoredClient {
  platformUrl: string;
  redirectUri: string;
  clientId: string;
  clientSecret: string;
}

interface Pending {
  state: string;
  nonce: string;
  verifier: string;
}

interface SignedIn {
  claims: Record<string, unknown>;
  userinfo: Record<string, unknown>;
  idToken: string;
}

const COOKIE = "demo_session";

/** The app of a previous run for this Platform and redirect URI, or a new one made through the API. */
async function clientFor(options: DemoOptions, redirectUri: string, home: string): Promise<StoredClient> {
  if (existsSync(options.stateFile)) {
    const stored = JSON.parse(readFileSync(options.stateFile, "utf8")) as StoredClient;
    if (stored.platformUrl === options.platformUrl && stored.redirectUri === redirectUri) return stored;
  }
  if (!options.pat) {
    throw new Error(
      `the demo has no app at ${options.platformUrl} yet: give an administrator's personal access token ` +
        "(DEMO_PAT, or PLATFORM_FIRSTINSTANCE_PAT_PATH naming the file the first start wrote) to create it; " +
        "`platform admin-token --out admin.pat` makes one (then DEMO_PAT=$(cat admin.pat))",
    );
  }
  const api = async (path: string, body: unknown) => {
    const response = await fetch(`${options.platformUrl}/resources/v3alpha${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${options.pat}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`POST ${path}: ${response.status} ${text}`);
    return JSON.parse(text);
  };
  const project = await api("/projects", { name: `Demo ${randomBytes(3).toString("hex")}` });
  const app = await api(`/projects/${project.details.id}/apps`, {
    name: "Demo relying party",
    oidc: {
      redirect_uris: [redirectUri],
      post_logout_redirect_uris: [home],
      response_types: ["OIDC_RESPONSE_TYPE_CODE"],
      grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE"],
      app_type: "OIDC_APP_TYPE_WEB",
      auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
    },
  });
  const stored: StoredClient = {
    platformUrl: options.platformUrl,
    redirectUri,
    clientId: app.client_id,
    clientSecret: app.client_secret,
  };
  writeFileSync(options.stateFile, `${JSON.stringify(stored, null, 2)}\n`, { mode: 0o600 });
  return stored;
}

const escapeHtml = (value: string) =>
  value.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!,
  );

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Demo relying party</title>
<link rel="icon" href="data:,">
<style>
  :root { color-scheme: light dark; font-family: system-ui, sans-serif; }
  body { max-width: 760px; margin: 40px auto; padding: 0 20px; line-height: 1.5; }
  h1 { font-size: 1.6rem; }
  table { border-collapse: collapse; width: 100%; margin: 8px 0 24px; }
  th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid #8884; vertical-align: top; }
  th { width: 30%; font-weight: 600; }
  td { font-family: ui-monospace, monospace; font-size: 0.875rem; word-break: break-all; }
  .button { display: inline-block; padding: 10px 18px; border-radius: 8px; background: #2553d8; color: #fff;
            text-decoration: none; font-weight: 600; }
  .muted { color: #6b7280; }
</style>
</head>
<body>
<main>
<h1>${escapeHtml(title)}</h1>
${body}
</main>
</body>
</html>
`;
}

function table(id: string, values: Record<string, unknown>): string {
  const rows = Object.entries(values)
    .map(
      ([key, value]) =>
        `<tr><th scope="row">${escapeHtml(key)}</th><td>${escapeHtml(typeof value === "string" ? value : JSON.stringify(value))}</td></tr>`,
    )
    .join("\n");
  return `<table id="${id}">\n${rows}\n</table>`;
}

function cookieOf(request: http.IncomingMessage): string | undefined {
  for (const part of (request.headers.cookie ?? "").split(";")) {
    const [name, ...value] = part.trim().split("=");
    if (name === COOKIE) return value.join("=");
  }
  return undefined;
}

/** Starts the demo relying party (creating its app on the first run); see the module comment. */
export async function startDemo(options: DemoOptions): Promise<Demo> {
  const pending = new Map<string, Pending>();
  const sessions = new Map<string, SignedIn>();
  let config: client.Configuration | undefined;
  let stored: StoredClient | undefined;

  const server = http.createServer((request, response) => {
    handle(request, response).catch((error: Error) => {
      response.writeHead(500, { "content-type": "text/html; charset=utf-8" });
      response.end(
        page("Sign-in failed", `<p>${escapeHtml(error.message)}</p><p><a href="/">Start again</a></p>`),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port, "localhost", resolve));
  const { port } = server.address() as AddressInfo;
  const home = `http://localhost:${port}/`;
  const redirectUri = `${home}callback`;
  try {
    stored = await clientFor(options, redirectUri, home);
    const insecure = options.platformUrl.startsWith("http:") ? [client.allowInsecureRequests] : [];
    config = await client.discovery(
      new URL(options.platformUrl),
      stored.clientId,
      undefined,
      client.ClientSecretBasic(stored.clientSecret),
      { execute: insecure },
    );
  } catch (error) {
    server.close();
    throw error;
  }

  async function handle(request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
    const url = new URL(request.url ?? "/", home);
    const send = (status: number, html: string, headers: Record<string, string> = {}) => {
      response.writeHead(status, { "content-type": "text/html; charset=utf-8", ...headers });
      response.end(html);
    };
    const redirect = (location: string, headers: Record<string, string> = {}) => {
      response.writeHead(302, { location, ...headers });
      response.end();
    };
    const cookie = cookieOf(request);

    if (url.pathname === "/login") {
      const key = randomBytes(32).toString("base64url");
      const flow: Pending = {
        state: client.randomState(),
        nonce: client.randomNonce(),
        verifier: client.randomPKCECodeVerifier(),
      };
      pending.set(key, flow);
      const target = client.buildAuthorizationUrl(config!, {
        redirect_uri: redirectUri,
        scope: "openid profile email",
        state: flow.state,
        nonce: flow.nonce,
        code_challenge: await client.calculatePKCECodeChallenge(flow.verifier),
        code_challenge_method: "S256",
        ...(url.searchParams.get("prompt") ? { prompt: url.searchParams.get("prompt")! } : {}),
      });
      return redirect(target.href, { "set-cookie": `${COOKIE}=${key}; HttpOnly; SameSite=Lax; Path=/` });
    }

    if (url.pathname === "/callback") {
      const flow = cookie ? pending.get(cookie) : undefined;
      if (!flow || !cookie) return redirect("/");
      pending.delete(cookie);
      const tokens = await client.authorizationCodeGrant(config!, url, {
        pkceCodeVerifier: flow.verifier,
        expectedState: flow.state,
        expectedNonce: flow.nonce,
        idTokenExpected: true,
      });
      const claims = tokens.claims()!;
      const userinfo = await client.fetchUserInfo(config!, tokens.access_token, claims.sub);
      sessions.set(cookie, { claims, userinfo, idToken: tokens.id_token! });
      return redirect("/");
    }

    if (url.pathname === "/logout") {
      const session = cookie ? sessions.get(cookie) : undefined;
      if (cookie) sessions.delete(cookie);
      if (!session) return redirect("/");
      const target = client.buildEndSessionUrl(config!, {
        id_token_hint: session.idToken,
        post_logout_redirect_uri: home,
        state: client.randomState(),
      });
      return redirect(target.href);
    }

    if (url.pathname !== "/") return send(404, page("Not found", '<p><a href="/">Home</a></p>'));
    const session = cookie ? sessions.get(cookie) : undefined;
    if (!session) {
      return send(
        200,
        page(
          "Demo relying party",
          `<p>This application signs you in with Platform at <code>${escapeHtml(options.platformUrl)}</code>
(authorization code flow with PKCE) and shows what it learns about you.</p>
<p><a class="button" id="sign-in" href="/login">Sign in with Platform</a></p>
<p class="muted">Client ID <code>${escapeHtml(stored!.clientId)}</code></p>`,
        ),
      );
    }
    const name = String(session.userinfo.name ?? session.userinfo.preferred_username ?? session.claims.sub);
    return send(
      200,
      page(
        `Hello, ${name}`,
        `<h2>ID token claims</h2>
${table("claims", session.claims)}
<h2>Userinfo</h2>
${table("userinfo", session.userinfo)}
<p><a class="button" id="sign-out" href="/logout">Sign out</a></p>`,
      ),
    );
  }

  return {
    url: `http://localhost:${port}`,
    clientId: stored.clientId,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
