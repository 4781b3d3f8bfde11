/**
 * Support of the authorization and end-session endpoint tests: OIDC apps made through the apps API, the
 * authorization URL, and reading an authorization response (query, fragment or form_post page).
 */
import assert from "node:assert/strict";
import type { Platform } from "../src/platform.ts";
import { type Json, restClient } from "./helpers.ts";
import type { Answer, HttpBrowser } from "./login.ts";

const PROJECTS = "/resources/v3alpha/projects";

export interface OidcAppConfig {
  redirect_uris: string[];
  post_logout_redirect_uris?: string[];
  response_types?: string[];
  grant_types?: string[];
  app_type?: string;
  auth_method?: string;
  [key: string]: unknown;
}

/** A project (named `name`) made through the projects API by the IAM_OWNER `owner`; answers its ID. */
export async function createProject(
  platform: Platform & { url: string },
  owner: string,
  name: string,
  settings: Record<string, unknown> = {},
): Promise<string> {
  const rest = restClient(platform, () => owner);
  const created = await rest("POST", PROJECTS, { json: { name, ...settings } });
  assert.equal(created.status, 201, created.text);
  return created.json.details.id;
}

/** An OIDC app of the project, made through the apps API: its client ID and secret (if it has one). */
export async function createOidcApp(
  platform: Platform & { url: string },
  owner: string,
  projectId: string,
  name: string,
  oidc: OidcAppConfig,
): Promise<{ appId: string; clientId: string; clientSecret?: string }> {
  const rest = restClient(platform, () => owner);
  const created = await rest("POST", `${PROJECTS}/${projectId}/apps`, { json: { name, oidc } });
  assert.equal(created.status, 201, created.text);
  const body: Json = created.json;
  return { appId: body.details.id, clientId: body.client_id, clientSecret: body.client_secret };
}

/** `/oauth/v2/authorize?<params>` (empty values left out). */
export function authorizePath(params: Record<string, string | undefined>): string {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined) query.set(key, value);
  return `/oauth/v2/authorize?${query}`;
}

/** Text of an HTML attribute (eta escapes & " ' < >). */
export function unescapeHtml(value: string): string {
  return value
    .replaceAll("&quot;", '"')
    .replaceAll("&#39;", "'")
    .replaceAll("&lt;", "<")
    .replaceAll("&gt;", ">")
    .replaceAll("&amp;", "&");
}

/** The parameters of an authorization response: the redirect's query or fragment, or the form_post fields. */
export function responseParams(answer: Answer): { url: URL; params: URLSearchParams; mode: string } {
  if (answer.status === 200 && answer.text.includes('id="form-post"')) {
    const action = /<form method="post" action="([^"]+)" id="form-post">/.exec(answer.text)?.[1];
    assert.ok(action, "the form_post page posts somewhere");
    const params = new URLSearchParams();
    for (const m of answer.text.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
      params.set(unescapeHtml(m[1]), unescapeHtml(m[2]));
    }
    return { url: new URL(unescapeHtml(action)), params, mode: "form_post" };
  }
  assert.ok(
    answer.status === 302 || answer.status === 303,
    `a redirect, not ${answer.status}: ${answer.text.slice(0, 300)}`,
  );
  assert.ok(answer.location, "a Location");
  const url = new URL(answer.location);
  if (url.hash) return { url, params: new URLSearchParams(url.hash.slice(1)), mode: "fragment" };
  return { url, params: url.searchParams, mode: "query" };
}

/**
 * Signs in through the login UI from the authorization request `path`: login name, then password; answers
 * the final redirect (or form_post page) to the client.
 */
export async function signInThroughUi(
  browser: HttpBrowser,
  path: string,
  loginName: string,
  password: string,
): Promise<Answer> {
  const first = await browser.follow(path);
  assert.equal(first.status, 200, `the login name page: ${first.text.slice(0, 300)}`);
  const passwordPage = await browser.submit(first, "/ui/login/loginname", { loginName });
  assert.equal(passwordPage.status, 200, passwordPage.text.slice(0, 300));
  return browser.submit(passwordPage, "/ui/login/password", { password });
}
