/**
 * Support of the login UI tests: a Platform with the test completer (src/login/testing.ts), users with
 * passwords, auth requests created through the store (as the authorization endpoint will), and a small
 * cookie-keeping HTTP client that does not follow redirects.
 */
import assert from "node:assert/strict";
import http from "node:http";
import { hashPassword } from "../src/crypto/password.ts";
import { addHumanEvent } from "../src/domain/user/commands.ts";
import { newId } from "../src/id.ts";
import type { AuthRequest, AuthRequestInput } from "../src/login/index.ts";
import { TestCompleter } from "../src/login/testing.ts";
import { startPlatform, type TestPlatform } from "./helpers.ts";

export const REDIRECT_URI = "http://app.test/callback";

export interface LoginTestPlatform extends TestPlatform {
  completer: TestCompleter;
}

export async function startLoginPlatform(env: Record<string, string> = {}): Promise<LoginTestPlatform> {
  const platform = await startPlatform({ listen: true, env });
  const completer = new TestCompleter();
  platform.login.completer = completer;
  return Object.assign(platform, { completer });
}

/** A human user with a password in the first instance (or `orgId`); answers its ID. */
export async function addHuman(
  platform: TestPlatform,
  username: string,
  password: string,
  options: { orgId?: string; givenName?: string; familyName?: string } = {},
): Promise<string> {
  const userId = newId();
  const givenName = options.givenName ?? username[0].toUpperCase() + username.slice(1);
  const familyName = options.familyName ?? "Example";
  await platform.eventStore.push(
    { instanceId: platform.bootstrapResult!.instanceId, creator: "test" },
    async () => [
      addHumanEvent(userId, options.orgId ?? platform.bootstrapResult!.orgId, {
        username,
        profile: {
          given_name: givenName,
          family_name: familyName,
          display_name: `${givenName} ${familyName}`,
        },
        email: { address: `${username}@example.com`, is_verified: true },
        password_hash: await hashPassword(password),
      }),
    ],
  );
  return userId;
}

/** An auth request as the authorization endpoint would create it (client `app`, redirect to app.test). */
export function createAuthRequest(
  platform: TestPlatform,
  overrides: Partial<AuthRequestInput> = {},
): Promise<AuthRequest> {
  return platform.login.authRequests.create({
    instanceId: platform.bootstrapResult!.instanceId,
    clientId: "app",
    redirectUri: REDIRECT_URI,
    responseType: "code",
    scope: ["openid", "profile"],
    state: `state-${newId()}`,
    ...overrides,
  });
}

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  /** Location of a redirect, relative to the platform when it points there. */
  location?: string;
}

/** A browser stand-in over HTTP: keeps cookies, never follows redirects, sends Accept: text/html. */
export class HttpBrowser {
  readonly cookies = new Map<string, string>();
  readonly setCookieHeaders: string[] = [];

  constructor(
    private readonly base: string,
    private readonly headers: Record<string, string> = {},
  ) {}

  /** One request over IPv4 (so every request of a test comes from the same client address). */
  private async send(
    path: string,
    init: { method: string; headers?: Record<string, string>; body?: string },
  ): Promise<Answer> {
    const cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
    const headers: Record<string, string> = {
      accept: "text/html",
      ...this.headers,
      ...(cookie ? { cookie } : {}),
      ...init.headers,
    };
    const response = await new Promise<{ status: number; headers: Headers; text: string }>(
      (resolve, reject) => {
        const request = http.request(
          `${this.base}${path}`,
          { method: init.method, headers, family: 4 },
          (res) => {
            let text = "";
            res.setEncoding("utf8");
            res.on("data", (chunk) => (text += chunk));
            res.on("end", () => {
              const all = new Headers();
              for (const [name, value] of Object.entries(res.headers))
                for (const v of Array.isArray(value) ? value : [value ?? ""]) all.append(name, v);
              resolve({ status: res.statusCode ?? 0, headers: all, text });
            });
          },
        );
        request.on("error", reject);
        request.end(init.body);
      },
    );
    for (const header of response.headers.getSetCookie()) {
      this.setCookieHeaders.push(header);
      const [pair, ...attributes] = header.split(";");
      const [name, value] = [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)];
      const expired = attributes.some(
        (a) => /^\s*max-age=0$/i.test(a) || /^\s*expires=thu, 01 jan 1970/i.test(a),
      );
      if (expired || value === "") this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    const location = response.headers.get("location") ?? undefined;
    return {
      status: response.status,
      headers: response.headers,
      text: response.text,
      location: location?.startsWith(this.base) ? location.slice(this.base.length) : location,
    };
  }

  get(path: string, headers: Record<string, string> = {}): Promise<Answer> {
    return this.send(path, { method: "GET", headers });
  }

  post(path: string, form: Record<string, string>, headers: Record<string, string> = {}): Promise<Answer> {
    return this.send(path, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
      body: new URLSearchParams(form).toString(),
    });
  }

  /** GETs `path` and follows redirects within the platform; answers the last answer. */
  async follow(path: string, headers: Record<string, string> = {}): Promise<Answer> {
    let answer = await this.get(path, headers);
    for (let i = 0; i < 10 && answer.location?.startsWith("/"); i++)
      answer = await this.get(answer.location, headers);
    return answer;
  }

  /**
   * POSTs a form (CSRF token and hidden fields taken from `page`) and follows the 303. A post that
   * completes a sign-in with `response_mode=form_post` answers the page posting to the client instead.
   */
  async submit(page: Answer, action: string, fields: Record<string, string>): Promise<Answer> {
    const form = formOf(page.text, action);
    const posted = await this.post(action, { ...form, ...fields });
    if (posted.status === 200 && posted.text.includes('id="form-post"')) return posted;
    assert.equal(posted.status, 303, `POST ${action} answers 303: ${posted.text.slice(0, 300)}`);
    return posted.location?.startsWith("/") ? this.follow(posted.location) : posted;
  }
}

/** The hidden fields of the form posting to `action` on a page. */
export function formOf(html: string, action: string): Record<string, string> {
  const start = html.indexOf(`action="${action}"`);
  assert.ok(start >= 0, `the page has a form posting to ${action}`);
  const form = html.slice(start, html.indexOf("</form>", start));
  const fields: Record<string, string> = {};
  for (const match of form.matchAll(
    /<input type="hidden" name="([^"]+)"(?: autocomplete="[^"]*")? value="([^"]*)">/g,
  ))
    fields[match[1]] = match[2].replaceAll("&#38;", "&").replaceAll("&amp;", "&");
  return fields;
}

/** The text of the page's alert (error), if any. */
export function alertOf(html: string): string | undefined {
  return /<div class="alert"[^>]*>([^<]*)<\/div>/.exec(html)?.[1];
}
