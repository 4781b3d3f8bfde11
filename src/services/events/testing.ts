/**
 * The fixture of the events API tests: a server with a system user, callers in every role that matters,
 * and activity through the API that writes every event type carrying a hash, a token or key material.
 */
import assert from "node:assert/strict";
import { exportSPKI, generateKeyPair, SignJWT } from "jose";
import {
  addMachineUser,
  addOrg,
  type Json,
  type RestCall,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";

export const EVENTS = "/resources/v3alpha/events";
export const SEARCH = `${EVENTS}/_search`;
export const USERS = "/resources/v3alpha/users";
const PROJECTS = "/resources/v3alpha/projects";

/** Event types whose stored payload holds a hash, a token or key material (src/domain/<aggregate>/events.ts). */
export const SECRET_CARRYING = [
  "user.human.added", // password_hash
  "user.password.changed", // password_hash
  "user.pat.added", // token_hash
  "user.machine.secret.set", // secret_hash
  "user.machine.key.added", // public_key
  "session.added", // token_hash
  "project.app.oidc.added", // secret_hash
  "project.app.api.added", // secret_hash
  "project.app.secret.changed", // secret_hash
  "project.app.key.added", // public_key
  "org.domain.added", // validation_token
];

type Caller = { userId: string; token: string };

export interface AuditFixture {
  platform: TestPlatform;
  instanceId: string;
  orgId: string;
  otherOrgId: string;
  owner: Caller; // IAM_OWNER
  viewer: Caller; // IAM_OWNER_VIEWER
  orgOwner: Caller; // ORG_OWNER of the first organization
  otherOwner: Caller; // ORG_OWNER of another organization
  adaId: string; // a human of the first organization: added, password changed, locked by the IAM_OWNER
  otherUserId: string; // a user of the other organization, created by its owner
  /** REST calls, as the IAM_OWNER unless a call names its token. */
  rest: RestCall;
  /** A search with a body of filters: an array as it is, an object as `asFilters` makes it. */
  search(filters: Json | Json[], query?: string, token?: string | null): ReturnType<RestCall>;
  /** Every event the caller may read (at most 1000), newest first (`query` adds query parameters). */
  all(token?: string, query?: string): Promise<Json[]>;
  /** A fresh JWT of the system user `ops-robot`. */
  systemToken(): Promise<string>;
}

export async function startAuditFixture(): Promise<AuditFixture> {
  const keys = await generateKeyPair("RS256");
  const platform = await startPlatform({
    listen: true,
    env: { PLATFORM_SYSTEM_API_USERS: JSON.stringify({ "ops-robot": await exportSPKI(keys.publicKey) }) },
  });
  const port = new URL(platform.url).port;
  const orgId = platform.bootstrapResult!.orgId;
  const owner = await addMachineUser(platform, {
    username: "owner",
    membership: { contextType: "instance", roles: ["IAM_OWNER"] },
  });
  const viewer = await addMachineUser(platform, {
    username: "viewer",
    membership: { contextType: "instance", roles: ["IAM_OWNER_VIEWER"] },
  });
  const orgOwner = await addMachineUser(platform, {
    username: "org-owner",
    membership: { contextType: "org", roles: ["ORG_OWNER"] },
  });
  const otherOrgId = await addOrg(platform, "Other Org");
  const otherOwner = await addMachineUser(platform, {
    username: "other-owner",
    orgId: otherOrgId,
    membership: { contextType: "org", contextId: otherOrgId, roles: ["ORG_OWNER"] },
  });

  const rest = restClient(platform, () => owner.token);
  const created = async (path: string, json?: unknown, token = owner.token) => {
    const r = await rest("POST", path, { json, token });
    assert.ok(r.status === 201 || r.status === 200, `${path}: ${r.text}`);
    return r.json;
  };
  const adaId = (
    await created(USERS, {
      username: "ada",
      human: {
        profile: { given_name: "Ada", family_name: "Lovelace", display_name: "Countess Ada" },
        email: { address: "ada@example.com", is_verified: true },
        password: { password: "First-Passw0rd!" },
      },
    })
  ).details.id;
  await created(`${USERS}/${adaId}/_set_password`, { password: "Second-Passw0rd!" });
  await created(`${USERS}/${adaId}/_lock`);
  const robot = (await created(USERS, { username: "robot", machine: { name: "Build robot" } })).details.id;
  await created(`${USERS}/${robot}/pats`, {});
  await created(`${USERS}/${robot}/_generate_secret`);
  await created(`${USERS}/${robot}/keys`, {});
  await created("/resources/v3alpha/sessions", { checks: { user: { login_name: "admin" } } });
  const project = (await created(PROJECTS, { name: "Shop" })).details.id;
  const apps = `${PROJECTS}/${project}/apps`;
  const web = await created(apps, { name: "Web", oidc: { redirect_uris: ["https://shop.example.com/cb"] } });
  await created(`${apps}/${web.details.id}/_regenerate_secret`);
  await created(apps, { name: "Api", api: { auth_method: "API_AUTH_METHOD_TYPE_BASIC" } });
  const jwtApp = await created(apps, {
    name: "Jwt",
    oidc: {
      redirect_uris: ["https://shop.example.com/cb"],
      auth_method: "OIDC_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT",
    },
  });
  await created(`${apps}/${jwtApp.details.id}/keys`, {});
  await created(`/resources/v3alpha/domains?ctx.org_id=${orgId}`, { domain: "shop.example.com" });
  // The other organization's owner acts in its organization only.
  const otherUserId = (
    await created(
      `${USERS}?ctx.org_id=${otherOrgId}`,
      { username: "grace", machine: { name: "Grace" } },
      otherOwner.token,
    )
  ).details.id;

  const search = (filters: Json | Json[], query = "", token?: string | null) =>
    rest("POST", `${SEARCH}${query}`, { json: Array.isArray(filters) ? filters : asFilters(filters), token });
  return {
    platform,
    instanceId: platform.bootstrapResult!.instanceId,
    orgId,
    otherOrgId,
    owner,
    viewer,
    orgOwner,
    otherOwner,
    adaId,
    otherUserId,
    rest,
    search,
    async all(token, query = "") {
      const r = await search({}, `?query.limit=1000${query}`, token);
      assert.equal(r.status, 200, r.text);
      return r.json.result;
    },
    systemToken: () =>
      new SignJWT({})
        .setProtectedHeader({ alg: "RS256" })
        .setIssuer("ops-robot")
        .setSubject("ops-robot")
        .setAudience(`http://localhost:${port}`)
        .setIssuedAt()
        .setExpirationTime("5m")
        .sign(keys.privateKey),
  };
}

/**
 * The body of a search from one object of conditions: one one-member filter per key, its value under the
 * key's own name (`{aggregate_id: "1"}` → `[{aggregate_id: {aggregate_id: "1"}}]`), in the keys' order.
 */
export function asFilters(conditions: Json): Json[] {
  return Object.entries(conditions).map(([kind, value]) => ({ [kind]: { [kind]: value } }));
}

/** An RFC 3339 time in microseconds since the epoch (the precision events are stored with). */
export function micros(rfc3339: string): bigint {
  const [whole, fraction = ""] = rfc3339.replace("Z", "").split(".");
  return BigInt(Date.parse(`${whole}Z`)) * 1000n + BigInt(fraction.padEnd(6, "0").slice(0, 6));
}
