import assert from "node:assert/strict";
import { createPublicKey, generateKeyPairSync } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { fromJson, toJson } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { importPKCS8, importSPKI, jwtVerify, SignJWT } from "jose";
import {
  addMachineUser,
  assertRejected,
  eventCount,
  grpcCall,
  type Json,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { constantTimeEqual, sha256 } from "../../crypto/tokens.ts";
import {
  AppSchema,
  OIDCConfigSchema,
  PlatformApps,
} from "../../gen/platform/resources/app/v3alpha/app_service_pb.ts";
import { newId } from "../../id.ts";
import { appByClientId } from "../../query/apps.ts";

const PROJECTS = "/resources/v3alpha/projects";

/** Every field of OIDCConfig, none at its default: what create must give back exactly. */
const FULL_OIDC = {
  redirect_uris: ["https://shop.example.com/callback", "http://localhost:3000/callback"],
  response_types: [
    "OIDC_RESPONSE_TYPE_CODE",
    "OIDC_RESPONSE_TYPE_ID_TOKEN",
    "OIDC_RESPONSE_TYPE_ID_TOKEN_TOKEN",
  ],
  grant_types: [
    "OIDC_GRANT_TYPE_AUTHORIZATION_CODE",
    "OIDC_GRANT_TYPE_IMPLICIT",
    "OIDC_GRANT_TYPE_REFRESH_TOKEN",
    "OIDC_GRANT_TYPE_TOKEN_EXCHANGE",
  ],
  app_type: "OIDC_APP_TYPE_NATIVE",
  auth_method: "OIDC_AUTH_METHOD_TYPE_POST",
  post_logout_redirect_uris: ["https://shop.example.com/bye", "com.example.shop:/bye"],
  access_token_type: "OIDC_TOKEN_TYPE_JWT",
  access_token_role_assertion: true,
  id_token_role_assertion: true,
  id_token_userinfo_assertion: true,
  dev_mode: true,
  clock_skew: "2.500s",
};

/** A valid code-flow web app (the base the validation cases change one field of). */
const WEB = {
  redirect_uris: ["https://shop.example.com/callback"],
  response_types: ["OIDC_RESPONSE_TYPE_CODE"],
  grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE"],
  app_type: "OIDC_APP_TYPE_WEB",
  auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
};

describe("apps", () => {
  let platform: TestPlatform;
  let owner: string; // IAM_OWNER token
  let instanceId: string;
  let projectId: string;

  const rest = restClient(
    () => platform,
    () => owner,
  );
  const apps = () => `${PROJECTS}/${projectId}/apps`;
  const createApp = async (app: unknown) => {
    const r = await rest("POST", apps(), { json: app });
    assert.equal(r.status, 201, r.text);
    return r.json;
  };
  const appCount = async () =>
    Number((await platform.db.query<{ n: number }>("SELECT count(*)::int AS n FROM apps"))[0].n);

  before(async () => {
    platform = await startPlatform({ listen: true });
    instanceId = platform.bootstrapResult!.instanceId;
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    const project = await rest("POST", PROJECTS, { json: { name: "Shop" } });
    projectId = project.json.details.id;
  });
  after(() => platform.stop());

  it("an OIDC app's configuration round-trips exactly through create → get → search (REST)", async () => {
    const created = await createApp({ name: "Full", oidc: FULL_OIDC });
    assert.match(created.client_id, /^\d+@shop$/);
    const id = created.details.id;
    const got = await rest("GET", `${apps()}/${id}`);
    assert.equal(got.status, 200, got.text);
    assert.deepEqual(got.json.app.app, { name: "Full", oidc: FULL_OIDC });
    assert.equal(got.json.app.client_id, created.client_id);
    assert.equal(got.json.app.project_id, projectId);
    assert.equal(got.json.app.has_client_secret, true);
    assert.equal(got.json.app.details.sequence, created.details.sequence);
    const found = await rest("POST", `${apps()}/_search`, { json: [{ in_ids: { ids: [id] } }] });
    assert.equal(found.status, 200, found.text);
    assert.deepEqual(found.json.result, [got.json.app]);

    // Zero values (WEB, BASIC, BEARER, false, 0s) are given back too; empty lists get their defaults.
    const minimal = await createApp({
      name: "Minimal",
      oidc: { redirect_uris: ["https://shop.example.com/cb"] },
    });
    const gotMinimal = await rest("GET", `${apps()}/${minimal.details.id}`);
    assert.deepEqual(gotMinimal.json.app.app.oidc, {
      redirect_uris: ["https://shop.example.com/cb"],
      response_types: ["OIDC_RESPONSE_TYPE_CODE"],
      grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE"],
      app_type: "OIDC_APP_TYPE_WEB",
      auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
      post_logout_redirect_uris: [],
      access_token_type: "OIDC_TOKEN_TYPE_BEARER",
      access_token_role_assertion: false,
      id_token_role_assertion: false,
      id_token_userinfo_assertion: false,
      dev_mode: false,
      clock_skew: "0s",
    });
  });

  it("... and over Connect", async () => {
    const client = createClient(
      PlatformApps,
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
    );
    const headers = { authorization: `Bearer ${owner}` };
    const app = fromJson(AppSchema, { name: "Connect", oidc: FULL_OIDC });
    const created = await client.createApp({ projectId, app }, { headers });
    assert.ok(created.clientSecret);
    const got = await client.getApp({ projectId, id: created.details!.id }, { headers });
    assert.equal(got.app!.app!.config.case, "oidc");
    assert.deepEqual(
      toJson(OIDCConfigSchema, got.app!.app!.config.value as never, {
        alwaysEmitImplicit: true,
        useProtoFieldName: true,
      }),
      FULL_OIDC,
    );
    const found = await client.searchApps(
      { projectId, filters: [{ filter: { case: "clientId", value: { clientId: created.clientId } } }] },
      { headers },
    );
    assert.equal(found.result.length, 1);
    assert.deepEqual(
      toJson(OIDCConfigSchema, found.result[0].app!.config.value as never, {
        alwaysEmitImplicit: true,
        useProtoFieldName: true,
      }),
      FULL_OIDC,
    );
    // REST reads what Connect wrote.
    const overRest = await rest("GET", `${apps()}/${created.details!.id}`);
    assert.deepEqual(overRest.json.app.app.oidc, FULL_OIDC);
  });

  it("each OIDC rule: 400 naming the field, nothing stored", async () => {
    const cases: Array<[string, Record<string, unknown>, string]> = [
      [
        "relative redirect URI",
        { redirect_uris: ["/callback"] },
        "app.oidc.redirect_uris[0]: must be an absolute URI",
      ],
      [
        "fragment",
        { redirect_uris: ["https://shop.example.com/ok", "https://shop.example.com/cb#frag"] },
        "app.oidc.redirect_uris[1]: must not contain a fragment",
      ],
      [
        "http off loopback without dev_mode",
        { redirect_uris: ["http://shop.example.com/cb"] },
        "app.oidc.redirect_uris[0]: must use https",
      ],
      [
        "custom scheme for a web app",
        { redirect_uris: ["com.example.shop:/cb"] },
        "app.oidc.redirect_uris[0]: the custom scheme com.example.shop is allowed only for native apps",
      ],
      [
        "script scheme, even native",
        { app_type: "OIDC_APP_TYPE_NATIVE", redirect_uris: ["javascript:alert(1)"] },
        "app.oidc.redirect_uris[0]: the scheme javascript is not allowed",
      ],
      [
        "post-logout URI: same rules",
        { post_logout_redirect_uris: ["http://shop.example.com/bye"] },
        "app.oidc.post_logout_redirect_uris[0]: must use https",
      ],
      [
        "post-logout URI fragment",
        { post_logout_redirect_uris: ["https://shop.example.com/bye#x"] },
        "app.oidc.post_logout_redirect_uris[0]: must not contain a fragment",
      ],
      [
        "ID_TOKEN without IMPLICIT",
        { response_types: ["OIDC_RESPONSE_TYPE_CODE", "OIDC_RESPONSE_TYPE_ID_TOKEN"] },
        "app.oidc.response_types[1]: OIDC_RESPONSE_TYPE_ID_TOKEN needs the grant type OIDC_GRANT_TYPE_IMPLICIT",
      ],
      [
        "ID_TOKEN_TOKEN without IMPLICIT",
        { response_types: ["OIDC_RESPONSE_TYPE_ID_TOKEN_TOKEN"] },
        "app.oidc.response_types[0]: OIDC_RESPONSE_TYPE_ID_TOKEN_TOKEN needs the grant type OIDC_GRANT_TYPE_IMPLICIT",
      ],
      [
        "CODE without AUTHORIZATION_CODE",
        { grant_types: ["OIDC_GRANT_TYPE_IMPLICIT"] },
        "app.oidc.response_types[0]: OIDC_RESPONSE_TYPE_CODE needs the grant type OIDC_GRANT_TYPE_AUTHORIZATION_CODE",
      ],
      [
        "no redirect URI for the code flow",
        { redirect_uris: [] },
        "app.oidc.redirect_uris: at least one redirect URI is required",
      ],
      [
        "NONE without PKCE (implicit + refresh)",
        {
          auth_method: "OIDC_AUTH_METHOD_TYPE_NONE",
          app_type: "OIDC_APP_TYPE_USER_AGENT",
          response_types: ["OIDC_RESPONSE_TYPE_ID_TOKEN"],
          grant_types: ["OIDC_GRANT_TYPE_IMPLICIT", "OIDC_GRANT_TYPE_REFRESH_TOKEN"],
        },
        "app.oidc.auth_method: OIDC_AUTH_METHOD_TYPE_NONE (no client authentication) needs OIDC_GRANT_TYPE_AUTHORIZATION_CODE with PKCE for OIDC_GRANT_TYPE_REFRESH_TOKEN",
      ],
      [
        "user agent app with a client secret (basic)",
        { app_type: "OIDC_APP_TYPE_USER_AGENT" },
        "app.oidc.auth_method: user agent apps cannot keep a client secret",
      ],
      [
        "user agent app with a client secret (post)",
        { app_type: "OIDC_APP_TYPE_USER_AGENT", auth_method: "OIDC_AUTH_METHOD_TYPE_POST" },
        "app.oidc.auth_method: user agent apps cannot keep a client secret",
      ],
      [
        "clock skew above 5s",
        { clock_skew: "5.000000001s" },
        "app.oidc.clock_skew: must be between 0s and 5s",
      ],
      ["negative clock skew", { clock_skew: "-1s" }, "app.oidc.clock_skew: must be between 0s and 5s"],
    ];
    const before = await appCount();
    for (const [what, change, message] of cases) {
      await assertRejected(
        platform,
        () => rest("POST", apps(), { json: { name: what, oidc: { ...WEB, ...change } } }),
        400,
        3,
        message,
      );
    }
    assert.equal(await appCount(), before);

    // The same rules on a patch that replaces the configuration.
    const app = await createApp({ name: "Patched", oidc: WEB });
    for (const [, change, message] of cases.slice(0, 4)) {
      await assertRejected(
        platform,
        () => rest("PATCH", `${apps()}/${app.details.id}`, { json: { oidc: { ...WEB, ...change } } }),
        400,
        3,
        message,
      );
    }
    assert.deepEqual(
      (await rest("GET", `${apps()}/${app.details.id}`)).json.app.app.oidc.redirect_uris,
      WEB.redirect_uris,
    );
  });

  it("what the rules allow: loopback http on any port, native custom schemes, dev mode, 5s, PKCE and implicit public clients", async () => {
    const allowed: Array<Record<string, unknown>> = [
      { redirect_uris: ["http://127.0.0.1:8080/cb", "http://localhost/cb", "http://[::1]:9/cb"] },
      {
        app_type: "OIDC_APP_TYPE_NATIVE",
        auth_method: "OIDC_AUTH_METHOD_TYPE_NONE",
        redirect_uris: ["com.example.app:/oauth2redirect", "http://127.0.0.1:51234/cb"],
        grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"],
      },
      { dev_mode: true, redirect_uris: ["http://shop.internal:8080/cb"] },
      { clock_skew: "5s" },
      {
        app_type: "OIDC_APP_TYPE_USER_AGENT",
        auth_method: "OIDC_AUTH_METHOD_TYPE_NONE",
        response_types: ["OIDC_RESPONSE_TYPE_ID_TOKEN_TOKEN"],
        grant_types: ["OIDC_GRANT_TYPE_IMPLICIT"],
      },
      { auth_method: "OIDC_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT" },
      // no browser flow: no redirect URI needed
      {
        redirect_uris: [],
        response_types: [],
        grant_types: ["OIDC_GRANT_TYPE_TOKEN_EXCHANGE"],
      },
    ];
    for (const [i, change] of allowed.entries()) {
      await createApp({ name: `allowed ${i}`, oidc: { ...WEB, ...change } });
    }
  });

  it("bad input: undefined enum values, empty strings, 1001 redirect URIs, a 10 kB URI → 400, nothing stored", async () => {
    const uris = Array.from({ length: 1001 }, (_, i) => `https://shop.example.com/cb/${i}`);
    const cases: Array<[unknown, RegExp]> = [
      [{ name: "x", oidc: { ...WEB, app_type: "OIDC_APP_TYPE_GALAXY" } }, /app_type/],
      [{ name: "x", oidc: { ...WEB, app_type: 7 } }, /^app\.oidc\.app_type: must be a defined value$/],
      [{ name: "x", oidc: { ...WEB, auth_method: 9 } }, /^app\.oidc\.auth_method: must be a defined value$/],
      [
        { name: "x", oidc: { ...WEB, access_token_type: 4 } },
        /^app\.oidc\.access_token_type: must be a defined value$/,
      ],
      [
        { name: "x", oidc: { ...WEB, response_types: [0, 5] } },
        /^app\.oidc\.response_types\[1\]: must be a defined value$/,
      ],
      // 3 is ZITADEL's device code grant: not offered
      [
        { name: "x", oidc: { ...WEB, grant_types: [0, 3] } },
        /^app\.oidc\.grant_types\[1\]: must be a defined value$/,
      ],
      [{ name: "x", oidc: { ...WEB, grant_types: ["OIDC_GRANT_TYPE_DEVICE_CODE"] } }, /grant_types/],
      [{ name: "x", api: { auth_method: "API_AUTH_METHOD_TYPE_MAGIC" } }, /auth_method/],
      [{ name: "x", api: { auth_method: 2 } }, /^app\.api\.auth_method: must be a defined value$/],
      [{ name: "", oidc: WEB }, /^app\.name: is required$/],
      [{ name: "  ", oidc: WEB }, /^app\.name: must not be blank$/],
      [
        { name: "x", oidc: { ...WEB, redirect_uris: [""] } },
        /^app\.oidc\.redirect_uris\[0\]: must not be empty$/,
      ],
      [
        { name: "x", oidc: { ...WEB, post_logout_redirect_uris: [""] } },
        /^app\.oidc\.post_logout_redirect_uris\[0\]: must not be empty$/,
      ],
      [
        { name: "x", oidc: { ...WEB, redirect_uris: uris } },
        /^app\.oidc\.redirect_uris: must have at most 1000 items$/,
      ],
      [
        { name: "x", oidc: { ...WEB, redirect_uris: [`https://shop.example.com/${"a".repeat(10_000)}`] } },
        /^app\.oidc\.redirect_uris\[0\]: must be at most 2048 characters$/,
      ],
      [
        { name: "x", oidc: { ...WEB, redirect_uris: ["https://a.example/cb", "https://a.example/cb"] } },
        /^app\.oidc\.redirect_uris\[1\]: must be unique$/,
      ],
      [
        {
          name: "x",
          oidc: { ...WEB, grant_types: ["OIDC_GRANT_TYPE_IMPLICIT", "OIDC_GRANT_TYPE_IMPLICIT"] },
        },
        /^app\.oidc\.grant_types\[1\]: must be unique$/,
      ],
      // a well-known type that does not decode: the field named all the same
      [
        { name: "x", oidc: { ...WEB, clock_skew: "soon" } },
        /^app\.oidc\.clock_skew: invalid google\.protobuf\.Duration/,
      ],
      [{ name: "x" }, /^app\.config: one of oidc, api must be set$/],
      [{ name: "x".repeat(201), oidc: WEB }, /^app\.name: must be at most 200 characters$/],
      [{ name: "x", oidc: WEB, api: { auth_method: 0 } }, /oneof set multiple times by oidc and api/],
      [undefined, /^app: is required$/],
    ];
    const before = await appCount();
    for (const [json, message] of cases) {
      await assertRejected(platform, () => rest("POST", apps(), { json }), 400, 3, message);
    }
    assert.equal(await appCount(), before);
    const search = await rest("POST", `${apps()}/_search`, { json: [{ name: { name: "x" } }] });
    assert.equal(search.json.result.length, 0);
    // an unknown project: 404
    await assertRejected(
      platform,
      () => rest("POST", `${PROJECTS}/${newId()}/apps`, { json: { name: "x", oidc: WEB } }),
      404,
      5,
    );
  });

  it("client secrets: 256-bit, returned once, stored as SHA-256; regenerating replaces at once; never for user agent apps", async () => {
    const created = await createApp({ name: "Secret", oidc: WEB });
    const secret: string = created.client_secret;
    assert.ok(Buffer.from(secret, "base64url").length >= 32, "at least 256 bits");
    const lookup = await appByClientId(platform.db, instanceId, created.client_id);
    assert.ok(lookup);
    assert.equal(lookup.clientSecretHash, sha256(secret));
    const stored = await platform.db.query<{ payload: Json }>(
      "SELECT payload FROM events WHERE event_type = 'project.app.oidc.added' AND payload->>'app_id' = $1",
      [created.details.id],
    );
    assert.ok(!JSON.stringify(stored).includes(secret), "no secret in the event");
    const got = await rest("GET", `${apps()}/${created.details.id}`);
    assert.ok(!got.text.includes(secret) && !got.text.includes(sha256(secret)));

    const regenerated = await rest("POST", `${apps()}/${created.details.id}/_regenerate_secret`);
    assert.equal(regenerated.status, 200, regenerated.text);
    const next: string = regenerated.json.client_secret;
    assert.notEqual(next, secret);
    const after = (await appByClientId(platform.db, instanceId, created.client_id))!;
    assert.ok(constantTimeEqual(after.clientSecretHash!, sha256(next)));
    assert.ok(!constantTimeEqual(after.clientSecretHash!, sha256(secret)), "the old secret stops working");

    // No secret for NONE / private_key_jwt apps, and nothing to regenerate.
    const pkce = await createApp({
      name: "PKCE",
      oidc: { ...WEB, app_type: "OIDC_APP_TYPE_USER_AGENT", auth_method: "OIDC_AUTH_METHOD_TYPE_NONE" },
    });
    assert.equal(pkce.client_secret, undefined);
    assert.equal((await appByClientId(platform.db, instanceId, pkce.client_id))!.clientSecretHash, null);
    await assertRejected(
      platform,
      () => rest("POST", `${apps()}/${pkce.details.id}/_regenerate_secret`),
      400,
      9,
      "the app's authentication method uses no client secret",
    );

    // API apps: BASIC has a secret, PRIVATE_KEY_JWT none.
    const basic = await createApp({ name: "API basic", api: { auth_method: "API_AUTH_METHOD_TYPE_BASIC" } });
    assert.ok(basic.client_secret);
    const jwt = await createApp({
      name: "API jwt",
      api: { auth_method: "API_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT" },
    });
    assert.equal(jwt.client_secret, undefined);
    const gotApi = await rest("GET", `${apps()}/${basic.details.id}`);
    assert.deepEqual(gotApi.json.app.app, {
      name: "API basic",
      api: { auth_method: "API_AUTH_METHOD_TYPE_BASIC" },
    });
    assert.equal(gotApi.json.app.has_client_secret, true);

    // Client IDs are unique in the instance.
    const ids = await platform.db.query<{ client_id: string }>(
      "SELECT client_id FROM apps WHERE instance_id = $1",
      [instanceId],
    );
    assert.equal(new Set(ids.map((r) => r.client_id)).size, ids.length);
  });

  it("patch: rename, replace the configuration, switching to a method without a secret removes it", async () => {
    const created = await createApp({ name: "Changing", oidc: WEB });
    const id = created.details.id;
    const count = await eventCount(platform);
    for (const json of [{}, { name: "Changing" }, { oidc: WEB }, undefined]) {
      const same = await rest("PATCH", `${apps()}/${id}`, { json });
      assert.equal(same.status, 200, same.text);
      assert.equal(same.json.details.sequence, created.details.sequence);
    }
    assert.equal(await eventCount(platform), count);

    const pkce = { ...WEB, auth_method: "OIDC_AUTH_METHOD_TYPE_NONE", dev_mode: true };
    const patched = await rest("PATCH", `${apps()}/${id}`, { json: { name: "Changed", oidc: pkce } });
    assert.equal(patched.status, 200, patched.text);
    const got = await rest("GET", `${apps()}/${id}`);
    assert.equal(got.json.app.app.name, "Changed");
    assert.equal(got.json.app.app.oidc.auth_method, "OIDC_AUTH_METHOD_TYPE_NONE");
    assert.equal(got.json.app.app.oidc.dev_mode, true);
    assert.equal(got.json.app.has_client_secret, false);
    assert.equal((await appByClientId(platform.db, instanceId, created.client_id))!.clientSecretHash, null);
    // Back to a secret-based method: a secret only after _regenerate_secret.
    assert.equal((await rest("PATCH", `${apps()}/${id}`, { json: { oidc: WEB } })).status, 200);
    assert.equal((await rest("GET", `${apps()}/${id}`)).json.app.has_client_secret, false);
    assert.equal((await rest("POST", `${apps()}/${id}/_regenerate_secret`)).status, 200);
    assert.equal((await rest("GET", `${apps()}/${id}`)).json.app.has_client_secret, true);

    await assertRejected(
      platform,
      () =>
        rest("PATCH", `${apps()}/${id}`, { json: { api: { auth_method: "API_AUTH_METHOD_TYPE_BASIC" } } }),
      400,
      9,
      "the app is an OIDC app",
    );
    await assertRejected(
      platform,
      () => rest("PATCH", `${apps()}/${id}`, { json: { name: "" } }),
      400,
      3,
      "app.name: must not be empty",
    );
    await assertRejected(
      platform,
      () => rest("PATCH", `${apps()}/${newId()}`, { json: { name: "x" } }),
      404,
      5,
      "app not found",
    );
  });

  it("patch changes only the fields present: REST JSON and binary gRPC, lists emptied by [] or update_mask", async () => {
    const created = await createApp({ name: "Production", oidc: FULL_OIDC });
    const id = created.details.id;
    const get = async () => (await rest("GET", `${apps()}/${id}`)).json.app.app;
    const patch = async (json: unknown, query = "") => {
      const r = await rest("PATCH", `${apps()}/${id}${query}`, { json });
      assert.equal(r.status, 200, r.text);
    };
    const grpc = (request: Json) =>
      grpcCall(platform, owner, PlatformApps, "PatchApp", { project_id: projectId, id, ...request });

    // The call: only the redirect URIs change; JWT, role assertions, post-logout URIs ... stay.
    const redirects = ["https://shop.example.com/new-callback"];
    await patch({ oidc: { redirect_uris: redirects } });
    let expected = { ...FULL_OIDC, redirect_uris: redirects };
    assert.deepEqual(await get(), { name: "Production", oidc: expected });

    // Binary protobuf: a client sets one field (false is present: the patch fields are `optional`).
    await grpc({ app: { oidc: { access_token_role_assertion: false } } });
    expected = { ...expected, access_token_role_assertion: false };
    assert.deepEqual(await get(), { name: "Production", oidc: expected });
    // The same bytes a client of the create message (OIDCConfig, no `optional`) sends for redirect URIs only.
    await grpc({ app: { oidc: { redirect_uris: FULL_OIDC.redirect_uris } } });
    expected = { ...expected, redirect_uris: FULL_OIDC.redirect_uris };
    assert.deepEqual(await get(), { name: "Production", oidc: expected });
    // An empty list is absent in binary protobuf: nothing changes ...
    await grpc({ app: { oidc: { post_logout_redirect_uris: [] } } });
    assert.deepEqual((await get()).oidc, expected);
    // ... unless update_mask names it; the mask also limits the change to the fields it names.
    await grpc({
      app: { name: "Ignored", oidc: { post_logout_redirect_uris: [] } },
      update_mask: "oidc.postLogoutRedirectUris",
    });
    expected = { ...expected, post_logout_redirect_uris: [] };
    assert.deepEqual(await get(), { name: "Production", oidc: expected });

    // REST: [] empties a list (update_mask comes from the JSON body), other fields stay.
    await patch({ oidc: { post_logout_redirect_uris: FULL_OIDC.post_logout_redirect_uris } });
    await patch({ name: "Renamed", oidc: { post_logout_redirect_uris: [], dev_mode: true } });
    assert.deepEqual(await get(), { name: "Renamed", oidc: expected });
    // An explicit update_mask in the query: only what it names, a named field absent from the body emptied.
    await patch({ name: "Not this", oidc: { dev_mode: false } }, "?update_mask=oidc.clock_skew");
    expected = { ...expected, clock_skew: "0s" };
    assert.deepEqual(await get(), { name: "Renamed", oidc: expected });
    // null and {} give no value in proto3 JSON: they change nothing (and store nothing).
    const count = await eventCount(platform);
    await patch({ name: null, oidc: { dev_mode: null, access_token_type: null } });
    await patch({ oidc: {} });
    assert.equal(await eventCount(platform), count);
    // The mask's paths in lowerCamelCase (the JSON form of a FieldMask) work as well.
    await patch(
      { oidc: { post_logout_redirect_uris: ["https://shop.example.com/bye"], dev_mode: false } },
      "?update_mask=oidc.postLogoutRedirectUris",
    );
    expected = { ...expected, post_logout_redirect_uris: ["https://shop.example.com/bye"] };
    assert.deepEqual(await get(), { name: "Renamed", oidc: expected });

    // The configuration that results is checked as a whole: token exchange only needs the response types
    // emptied as well (the stored [CODE] needs the code flow).
    await assertRejected(
      platform,
      () =>
        rest("PATCH", `${apps()}/${id}`, {
          json: { oidc: { grant_types: ["OIDC_GRANT_TYPE_TOKEN_EXCHANGE"] } },
        }),
      400,
      3,
      "app.oidc.response_types[0]: OIDC_RESPONSE_TYPE_CODE needs the grant type OIDC_GRANT_TYPE_AUTHORIZATION_CODE",
    );
    await patch({ oidc: { grant_types: ["OIDC_GRANT_TYPE_TOKEN_EXCHANGE"], response_types: [] } });
    expected = { ...expected, grant_types: ["OIDC_GRANT_TYPE_TOKEN_EXCHANGE"], response_types: [] };
    assert.deepEqual((await get()).oidc, expected);

    // update_mask must name fields of the body.
    await assertRejected(
      platform,
      () => rest("PATCH", `${apps()}/${id}?update_mask=oidc.nope`, { json: { name: "x" } }),
      400,
      3,
      'update_mask: "oidc.nope" names no field of app',
    );
    await assertRejected(
      platform,
      () => rest("PATCH", `${apps()}/${id}?update_mask=*`, { json: { name: "x" } }),
      400,
      3,
      "update_mask: name the fields of app to change",
    );

    // API apps: the method changes only when given; BASIC (0) is present in binary too.
    const apiApp = await createApp({
      name: "API",
      api: { auth_method: "API_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT" },
    });
    const apiId = apiApp.details.id;
    const apiGet = async () => (await rest("GET", `${apps()}/${apiId}`)).json.app.app;
    assert.equal(
      (await rest("PATCH", `${apps()}/${apiId}`, { json: { name: "API 2", api: {} } })).status,
      200,
    );
    assert.deepEqual(await apiGet(), {
      name: "API 2",
      api: { auth_method: "API_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT" },
    });
    await grpcCall(platform, owner, PlatformApps, "PatchApp", {
      project_id: projectId,
      id: apiId,
      app: { api: { auth_method: "API_AUTH_METHOD_TYPE_BASIC" } },
    });
    assert.deepEqual(await apiGet(), { name: "API 2", api: { auth_method: "API_AUTH_METHOD_TYPE_BASIC" } });
  });

  it("keys for private_key_jwt: generated key file, own public key, list, delete; the lookup has them", async () => {
    const app = await createApp({
      name: "JWT client",
      oidc: { ...WEB, auth_method: "OIDC_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT" },
    });
    const keys = `${apps()}/${app.details.id}/keys`;
    const generated = await rest("POST", keys, { json: { expiration_date: "2099-01-01T00:00:00Z" } });
    assert.equal(generated.status, 201, generated.text);
    const file = JSON.parse(Buffer.from(generated.json.key_content, "base64").toString());
    assert.deepEqual(Object.keys(file).sort(), ["appId", "clientId", "key", "keyId", "type"]);
    assert.equal(file.type, "application");
    assert.equal(file.keyId, generated.json.key_id);
    assert.equal(file.appId, app.details.id);
    assert.equal(file.clientId, app.client_id);
    assert.match(file.key, /^-----BEGIN PRIVATE KEY-----/);

    // A client assertion signed with the file's key verifies with the stored public key.
    const lookup = (await appByClientId(platform.db, instanceId, app.client_id))!;
    assert.equal(lookup.authMethod, "private_key_jwt");
    const stored = lookup.keys.find((k) => k.id === file.keyId)!;
    assert.equal(stored.expiresAt?.toISOString(), "2099-01-01T00:00:00.000Z");
    const assertion = await new SignJWT({})
      .setProtectedHeader({ alg: "RS256", kid: file.keyId })
      .setIssuer(file.clientId)
      .setSubject(file.clientId)
      .sign(await importPKCS8(file.key, "RS256"));
    const verified = await jwtVerify(assertion, await importSPKI(stored.publicKey, "RS256"));
    assert.equal(verified.payload.sub, app.client_id);
    const events = await platform.db.query<{ payload: Json }>(
      "SELECT payload FROM events WHERE event_type = 'project.app.key.added' AND payload->>'key_id' = $1",
      [file.keyId],
    );
    assert.ok(!JSON.stringify(events[0].payload).includes("PRIVATE KEY"), "no private key stored");

    // The caller's own public key: no key file.
    const own = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const pem = own.publicKey.export({ type: "spki", format: "pem" }).toString();
    const provided = await rest("POST", keys, { json: { public_key: pem } });
    assert.equal(provided.status, 201, provided.text);
    assert.equal(provided.json.key_content, "");
    await assertRejected(
      platform,
      () => rest("POST", keys, { json: { public_key: "not a key" } }),
      400,
      3,
      "key.public_key: must be a PEM",
    );
    await assertRejected(
      platform,
      () => rest("POST", keys, { json: { expiration_date: "2001-01-01T00:00:00Z" } }),
      400,
      3,
      "key.expiration_date: must be in the future",
    );

    const listed = await rest("GET", `${keys}?query.asc=true`);
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(
      listed.json.result.map((k: Json) => k.details.id),
      [generated.json.key_id, provided.json.key_id],
    );
    assert.equal(listed.json.result[0].expiration_date, "2099-01-01T00:00:00Z");
    assert.equal(createPublicKey(listed.json.result[1].public_key).asymmetricKeyType, "ec");

    assert.equal((await rest("DELETE", `${keys}/${generated.json.key_id}`)).status, 200);
    await assertRejected(
      platform,
      () => rest("DELETE", `${keys}/${generated.json.key_id}`),
      404,
      5,
      "key not found",
    );
    assert.deepEqual(
      (await appByClientId(platform.db, instanceId, app.client_id))!.keys.map((k) => k.id),
      [provided.json.key_id],
    );

    // Apps authenticating otherwise have no keys.
    const basic = await createApp({ name: "No keys", oidc: WEB });
    await assertRejected(
      platform,
      () => rest("POST", `${apps()}/${basic.details.id}/keys`, { json: {} }),
      400,
      9,
      "keys exist only for apps with the authentication method private_key_jwt",
    );

    // Deleting the app: gone from reads and from client lookups.
    assert.equal((await rest("DELETE", `${apps()}/${app.details.id}`)).status, 200);
    assert.equal((await rest("GET", `${apps()}/${app.details.id}`)).status, 404);
    assert.equal(await appByClientId(platform.db, instanceId, app.client_id), undefined);
    assert.equal(
      (await platform.db.query("SELECT 1 FROM app_keys WHERE app_id = $1", [app.details.id])).length,
      0,
    );
  });

  it("appByClientId: the full configuration with OAuth 2.0 names, in one query", async () => {
    const created = await createApp({ name: "Lookup", oidc: FULL_OIDC });
    const lookup = await appByClientId(platform.db, instanceId, created.client_id);
    assert.deepEqual(lookup, {
      appId: created.details.id,
      projectId,
      orgId: platform.bootstrapResult!.orgId,
      name: "Lookup",
      type: "oidc",
      clientId: created.client_id,
      authMethod: "client_secret_post",
      clientSecretHash: sha256(created.client_secret),
      oidc: {
        redirectUris: FULL_OIDC.redirect_uris,
        postLogoutRedirectUris: FULL_OIDC.post_logout_redirect_uris,
        responseTypes: ["code", "id_token", "id_token token"],
        grantTypes: [
          "authorization_code",
          "implicit",
          "refresh_token",
          "urn:ietf:params:oauth:grant-type:token-exchange",
        ],
        appType: "native",
        accessTokenType: "jwt",
        accessTokenRoleAssertion: true,
        idTokenRoleAssertion: true,
        idTokenUserinfoAssertion: true,
        devMode: true,
        clockSkewMs: 2500,
      },
      keys: [],
      projectRoleAssertion: false,
      projectRoleCheck: false,
    });
    assert.equal(await appByClientId(platform.db, instanceId, "unknown@shop"), undefined);
    assert.equal(await appByClientId(platform.db, newId(), created.client_id), undefined);
    const api = await createApp({ name: "Lookup API", api: { auth_method: "API_AUTH_METHOD_TYPE_BASIC" } });
    const apiLookup = (await appByClientId(platform.db, instanceId, api.client_id))!;
    assert.equal(apiLookup.type, "api");
    assert.equal(apiLookup.authMethod, "client_secret_basic");
    assert.equal(apiLookup.oidc, undefined);
  });

  it("search and permissions: project.app.* in the project", async () => {
    const filtered = await rest(
      "POST",
      `${apps()}/_search?sorting_column=APP_FIELD_NAME_NAME&query.asc=true`,
      {
        json: [
          { type: { type: "APP_TYPE_API" } },
          { name: { name: "lookup", method: "TEXT_FILTER_METHOD_STARTS_WITH_IGNORE_CASE" } },
        ],
      },
    );
    assert.equal(filtered.status, 200, filtered.text);
    assert.deepEqual(
      filtered.json.result.map((a: Json) => a.app.name),
      ["Lookup API"],
    );
    const projectOwner = await addMachineUser(platform, {
      username: "app-project-owner",
      membership: { contextType: "project", contextId: projectId, roles: ["PROJECT_OWNER"] },
    });
    const viewer = await addMachineUser(platform, {
      username: "app-viewer",
      membership: { contextType: "project", contextId: projectId, roles: ["PROJECT_OWNER_VIEWER"] },
    });
    const outsider = await addMachineUser(platform, { username: "app-outsider" });
    const made = await rest("POST", apps(), {
      json: { name: "By owner", oidc: WEB },
      token: projectOwner.token,
    });
    assert.equal(made.status, 201, made.text);
    const path = `${apps()}/${made.json.details.id}`;
    assert.equal((await rest("GET", path, { token: viewer.token })).status, 200);
    await assertRejected(
      platform,
      () => rest("POST", apps(), { json: { name: "v", oidc: WEB }, token: viewer.token }),
      403,
      7,
    );
    await assertRejected(
      platform,
      () => rest("POST", `${path}/_regenerate_secret`, { token: viewer.token }),
      403,
      7,
    );
    await assertRejected(platform, () => rest("DELETE", path, { token: viewer.token }), 403, 7);
    assert.equal((await rest("GET", path, { token: outsider.token })).status, 404);
    assert.equal((await rest("POST", `${apps()}/_search`, { json: [], token: outsider.token })).status, 404);
    assert.equal((await rest("DELETE", path, { token: projectOwner.token })).status, 200);
  });
});
