import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  createLocalJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  type JSONWebKeySet,
  jwtVerify,
  SignJWT,
} from "jose";
import {
  addMachineUser,
  assertRejected,
  restClient,
  startPlatform,
  type TestPlatform,
  testTime,
} from "../../../test/helpers.ts";
import {
  basic,
  client,
  discover,
  type MachineClient,
  machineClient,
  ownerToken,
  postForm,
} from "../../../test/oidc.ts";
import { resolveMasterKey } from "../../config.ts";
import { EventStore } from "../../eventstore/eventstore.ts";
import {
  type ECDSACurve,
  ListWebKeysResponseSchema,
  PlatformWebKeys,
  RSABits,
  RSAHasher,
  WebKeyState,
} from "../../gen/platform/resources/web_key/v3alpha/web_key_service_pb.ts";
import { SigningKeys } from "../../oidc/keys.ts";
import { projections } from "../../query/projections/index.ts";

const WEB_KEYS = "/resources/v3alpha/web_keys";
const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/** The web keys API (ZITADEL's WebKeyService): list, create, activate and delete an instance's signing keys. */
describe("web keys API", () => {
  let platform: TestPlatform;
  let owner: string;
  let orgOwner: string;
  let svc: MachineClient; // signs jwt-bearer assertions: gets ID tokens
  let jwtClient: MachineClient; // client_credentials: JWT access tokens
  const rest = restClient(
    () => platform,
    () => owner,
  );
  const grpc = () => createClient(PlatformWebKeys, createGrpcTransport({ baseUrl: platform.url }));
  const asOwner = () => ({ headers: { authorization: `Bearer ${owner}` } });

  const jwks = async (): Promise<JSONWebKeySet> => {
    const r = await fetch(`${platform.url}/oauth/v2/keys`);
    assert.equal(r.status, 200);
    return (await r.json()) as JSONWebKeySet;
  };
  const discoveredAlgorithms = async (): Promise<string[]> => {
    const r = await fetch(`${platform.url}/.well-known/openid-configuration`);
    return ((await r.json()) as { id_token_signing_alg_values_supported: string[] })
      .id_token_signing_alg_values_supported;
  };
  const listed = async () => {
    const r = await rest("GET", WEB_KEYS);
    assert.equal(r.status, 200, r.text);
    return r.json.web_keys as {
      details: { id: string };
      state: string;
      algorithm: string;
      config: Record<string, Record<string, string>>;
      active_from?: string;
      active_until?: string;
      published_until?: string;
    }[];
  };
  const stateOf = async (id: string) => (await listed()).find((k) => k.details.id === id)?.state;

  /**
   * ID and access token of the jwt-bearer grant through openid-client, which checks the ID token's signature
   * against the key set (non-repudiation checks) and its algorithm against discovery's list.
   */
  const signIn = async () => {
    const config = await discover(platform.url, svc.clientId, client.None());
    client.enableNonRepudiationChecks(config);
    const assertion = await new SignJWT({
      iss: svc.userId,
      sub: svc.userId,
      aud: platform.url,
      iat: Math.floor(Date.now() / 1000),
      exp: Math.floor(Date.now() / 1000) + 300,
      jti: crypto.randomUUID(),
    })
      .setProtectedHeader({ alg: "RS256", kid: svc.key!.keyId })
      .sign(svc.key!.privateKey);
    const tokens = await client.genericGrantRequest(config, JWT_BEARER, { assertion, scope: "openid" });
    assert.equal(tokens.claims()!.sub, svc.userId);
    return { idToken: tokens.id_token!, accessToken: tokens.access_token };
  };
  const jwtAccessToken = async (scope = "openid") => {
    const r = await postForm(
      `${platform.url}/oauth/v2/token`,
      { grant_type: "client_credentials", scope },
      basic(jwtClient.clientId, jwtClient.clientSecret),
    );
    assert.equal(r.status, 200, r.text);
    return r.json.access_token as string;
  };
  const introspect = async (token: string) =>
    (
      await postForm(
        `${platform.url}/oauth/v2/introspect`,
        { token },
        basic(jwtClient.clientId, jwtClient.clientSecret),
      )
    ).json.active as boolean;
  /** The kid a token verifies with against the key set as published now (throws when it does not). */
  const verifiedKid = async (token: string) =>
    (await jwtVerify(token, createLocalJWKSet(await jwks()), { issuer: platform.url })).protectedHeader.kid;
  const kidOf = (token: string) => decodeProtectedHeader(token).kid;
  /** End session with an ID token as hint: 400 (an error page) when the server does not verify it. */
  const endSessionStatus = async (idToken: string) =>
    (
      await fetch(`${platform.url}/oidc/v1/end_session?${new URLSearchParams({ id_token_hint: idToken })}`, {
        redirect: "manual",
      })
    ).status;
  const algOf = (token: string) => decodeProtectedHeader(token).alg;

  before(async () => {
    platform = await startPlatform({ listen: true });
    owner = await ownerToken(platform);
    orgOwner = (
      await addMachineUser(platform, {
        username: "org-owner",
        membership: { contextType: "org", roles: ["ORG_OWNER"] },
      })
    ).token;
    svc = await machineClient(platform, owner, "svc-web-keys", { withKey: true });
    jwtClient = await machineClient(platform, owner, "svc-web-keys-jwt", { accessTokenType: "JWT" });
  });
  after(() => platform?.stop());

  it("lists the automatic key as ACTIVE RS256; only instance roles may use the API (ORG_OWNER: 403)", async () => {
    await signIn(); // the instance's first key
    const keys = await listed();
    assert.equal(keys.length, 1);
    const [key] = keys;
    assert.equal(key.state, "STATE_ACTIVE");
    assert.equal(key.algorithm, "RS256");
    assert.deepEqual(key.config, { rsa: { bits: "RSA_BITS_2048", hasher: "RSA_HASHER_SHA256" } });
    assert.ok(key.active_from && key.active_until && key.published_until);
    assert.deepEqual(
      (await jwks()).keys.map((k) => k.kid),
      [key.details.id],
    );
    assert.deepEqual(await discoveredAlgorithms(), ["RS256"]);

    const asOrgOwner = { token: orgOwner };
    for (const [method, path, json] of [
      ["GET", WEB_KEYS, undefined],
      ["POST", WEB_KEYS, {}],
      ["POST", `${WEB_KEYS}/${key.details.id}/_activate`, undefined],
      ["DELETE", `${WEB_KEYS}/${key.details.id}`, undefined],
    ] as const) {
      await assertRejected(platform, () => rest(method, path, { ...asOrgOwner, json }), 403, 7);
    }
    await assertRejected(platform, () => rest("POST", WEB_KEYS, { token: null, json: {} }), 401, 16);
    await assert.rejects(
      grpc().listWebKeys({}, { headers: { authorization: `Bearer ${orgOwner}` } }),
      (e) => e instanceof ConnectError && e.code === Code.PermissionDenied,
    );
  });

  it("creates an ES256 key over REST: published at once (INITIAL), not signing; the private key never in an event", async () => {
    const before = await signIn();
    const created = await rest("POST", WEB_KEYS, { json: { ecdsa: { curve: "ECDSA_CURVE_P256" } } });
    assert.equal(created.status, 201, created.text);
    const kid = created.json.details.id as string;
    const published = (await jwks()).keys.find((k) => k.kid === kid);
    assert.deepEqual(published && Object.keys(published).sort(), [
      "alg",
      "crv",
      "kid",
      "kty",
      "use",
      "x",
      "y",
    ]);
    assert.equal(published!.alg, "ES256");
    assert.equal(published!.crv, "P-256");
    assert.equal(await stateOf(kid), "STATE_INITIAL");
    const [listedKey] = (await listed()).filter((k) => k.details.id === kid);
    assert.deepEqual(listedKey.config, { ecdsa: { curve: "ECDSA_CURVE_P256" } });
    assert.equal(listedKey.active_from, undefined);
    assert.equal(listedKey.published_until, undefined, "published until deleted");
    // Still signing with the old key; discovery names both algorithms, the active key's first.
    assert.equal(kidOf((await signIn()).idToken), kidOf(before.idToken));
    assert.deepEqual(await discoveredAlgorithms(), ["RS256", "ES256"]);

    const events = await platform.db.query<{
      event_type: string;
      payload: Record<string, unknown>;
      creator: string;
    }>(
      "SELECT event_type, payload, creator FROM events WHERE aggregate_type = 'web_key' AND aggregate_id = $1",
      [kid],
    );
    assert.deepEqual(
      events.map((e) => e.event_type),
      ["web_key.added"],
    );
    assert.doesNotMatch(JSON.stringify(events[0].payload), /"d"/, "no private key in the event");
    assert.notEqual(events[0].creator, "system");
  });

  it("activation: new ID tokens and JWT access tokens are signed with the new key and verify through the key set; older tokens verify until their key is deleted", async () => {
    const oldTokens = await signIn();
    const oldAccess = await jwtAccessToken();
    // a JWT access token for the management APIs (its user holds no role there: 403, not 401)
    const oldApiToken = await jwtAccessToken("openid urn:platform:iam:org:project:id:platform:aud");
    assert.equal((await rest("GET", WEB_KEYS, { token: oldApiToken })).status, 403);
    const oldKid = kidOf(oldTokens.idToken)!;
    const next = (await listed()).find((k) => k.state === "STATE_INITIAL" && k.algorithm === "ES256")!;
    const kid = next.details.id;

    const activated = await rest("POST", `${WEB_KEYS}/${kid}/_activate`);
    assert.equal(activated.status, 200, activated.text);
    assert.equal(activated.json.details.id, kid);
    assert.deepEqual(await discoveredAlgorithms(), ["ES256", "RS256"]);
    const states = await listed();
    assert.deepEqual(
      states.map((k) => [k.details.id, k.state]),
      [
        [kid, "STATE_ACTIVE"],
        [oldKid, "STATE_INACTIVE"],
      ],
      "the active key first",
    );

    const fresh = await signIn(); // openid-client verified its signature through the key set
    assert.equal(kidOf(fresh.idToken), kid);
    assert.equal(algOf(fresh.idToken), "ES256");
    const atHash = createHash("sha256")
      .update(fresh.accessToken)
      .digest()
      .subarray(0, 16)
      .toString("base64url");
    assert.equal(decodeJwt(fresh.idToken).at_hash, atHash);
    const freshAccess = await jwtAccessToken();
    assert.equal(kidOf(freshAccess), kid);
    assert.equal(await verifiedKid(freshAccess), kid);
    // Tokens signed before still verify, and the JWT access token is still active.
    assert.equal(await verifiedKid(oldTokens.idToken), oldKid);
    assert.equal(await verifiedKid(oldAccess), oldKid);
    assert.equal(await introspect(oldAccess), true);
    assert.equal(await endSessionStatus(fresh.idToken), 302, "an ES256 ID token is a valid hint");
    assert.equal(await endSessionStatus(oldTokens.idToken), 302);

    // Activating the active key again changes nothing.
    const again = await rest("POST", `${WEB_KEYS}/${kid}/_activate`);
    assert.equal(again.status, 200);
    assert.equal(again.json.details.sequence, activated.json.details.sequence);

    // The active key cannot be deleted.
    await assertRejected(
      platform,
      () => rest("DELETE", `${WEB_KEYS}/${kid}`),
      400,
      9,
      "the active web key cannot be deleted",
    );

    // Deleting the old key ends what it signed: gone from the key set, its tokens no longer verify.
    const deleted = await rest("DELETE", `${WEB_KEYS}/${oldKid}`);
    assert.equal(deleted.status, 200, deleted.text);
    assert.ok(!(await jwks()).keys.some((k) => k.kid === oldKid));
    await assert.rejects(verifiedKid(oldTokens.idToken));
    assert.equal(
      await introspect(oldAccess),
      false,
      "a JWT access token of a deleted key is no longer active",
    );
    assert.equal(await introspect(freshAccess), true);
    assert.deepEqual(await discoveredAlgorithms(), ["ES256"]);
    const secrets = await platform.db.query("SELECT id FROM oidc_signing_key_secrets WHERE id = $1", [
      oldKid,
    ]);
    assert.equal(secrets.length, 0, "the private key is erased");
    assert.deepEqual(
      (
        await platform.db.query<{ event_type: string }>(
          "SELECT event_type FROM events WHERE aggregate_type = 'web_key' AND aggregate_id = $1 ORDER BY sequence",
          [oldKid],
        )
      ).map((e) => e.event_type),
      ["web_key.added", "web_key.deactivated", "web_key.removed"],
    );
    await assertRejected(platform, () => rest("DELETE", `${WEB_KEYS}/${oldKid}`), 404, 5);
    await assertRejected(platform, () => rest("POST", `${WEB_KEYS}/${oldKid}/_activate`), 404, 5);
  });

  it("over gRPC: creates an RSA key (RS384), activates it, lists it as REST does", async () => {
    const c = grpc();
    const created = await c.createWebKey(
      {
        key: {
          config: {
            case: "rsa",
            value: { bits: RSABits.RSA_BITS_2048, hasher: RSAHasher.RSA_HASHER_SHA384 },
          },
        },
      },
      asOwner(),
    );
    const kid = created.details!.id;
    assert.ok((await jwks()).keys.some((k) => k.kid === kid && k.alg === "RS384" && k.kty === "RSA"));
    await c.activateWebKey({ id: kid }, asOwner());
    const viaGrpc = await c.listWebKeys({}, asOwner());
    assert.equal(viaGrpc.webKeys[0].details!.id, kid);
    assert.equal(viaGrpc.webKeys[0].state, WebKeyState.STATE_ACTIVE);
    assert.equal(viaGrpc.webKeys[0].algorithm, "RS384");
    assert.deepEqual(
      toJson(ListWebKeysResponseSchema, viaGrpc, { useProtoFieldName: true }),
      (await rest("GET", WEB_KEYS)).json,
    );
    const { idToken } = await signIn();
    assert.equal(kidOf(idToken), kid);
    assert.equal(algOf(idToken), "RS384");

    await assert.rejects(
      c.deleteWebKey({ id: kid }, asOwner()),
      (e) => e instanceof ConnectError && e.code === Code.FailedPrecondition,
    );
    await assert.rejects(
      c.createWebKey({ key: { config: { case: "ecdsa", value: { curve: 9 as ECDSACurve } } } }, asOwner()),
      (e) =>
        e instanceof ConnectError && e.code === Code.InvalidArgument && /key\.ecdsa\.curve/.test(e.message),
    );
  });

  it("bad input: 400 naming the field (unknown algorithm, RSA bits, curve, hasher), nothing stored", async () => {
    for (const [body, message] of [
      [{ rsa: { bits: 7 } }, /^key\.rsa\.bits: must be a defined value/],
      [{ rsa: { bits: "RSA_BITS_1024" } }, /^key\.rsa\.bits: unknown value "RSA_BITS_1024"/],
      [{ rsa: { hasher: "RSA_HASHER_MD5" } }, /^key\.rsa\.hasher: unknown value/],
      [{ ecdsa: { curve: 12 } }, /^key\.ecdsa\.curve: must be a defined value/],
      [{ dsa: {} }, /^key: .*"dsa" is unknown/],
      [{ rsa: {}, ecdsa: {} }, /^key: .*oneof set multiple times by rsa and ecdsa/],
    ] as const) {
      await assertRejected(platform, () => rest("POST", WEB_KEYS, { json: body }), 400, 3, message);
    }
    await assertRejected(platform, () => rest("POST", `${WEB_KEYS}/424242/_activate`), 404, 5);
    // No configuration: RSA 2048 with SHA-256.
    const plain = await rest("POST", WEB_KEYS, { json: {} });
    assert.equal(plain.status, 201, plain.text);
    const [made] = (await listed()).filter((k) => k.details.id === plain.json.details.id);
    assert.equal(made.algorithm, "RS256");
    assert.deepEqual(made.config, { rsa: { bits: "RSA_BITS_2048", hasher: "RSA_HASHER_SHA256" } });
    assert.equal((await rest("DELETE", `${WEB_KEYS}/${plain.json.details.id}`)).status, 200);
    await assertRejected(platform, () => rest("DELETE", `${WEB_KEYS}/424242`), 404, 5);
  });

  it("Ed25519: EdDSA ID tokens (at_hash over SHA-512) that openid-client verifies", async () => {
    const created = await rest("POST", WEB_KEYS, { json: { ed25519: {} } });
    assert.equal(created.status, 201, created.text);
    const kid = created.json.details.id;
    const published = (await jwks()).keys.find((k) => k.kid === kid)!;
    assert.deepEqual(Object.keys(published).sort(), ["alg", "crv", "kid", "kty", "use", "x"]);
    assert.equal(published.alg, "EdDSA");
    assert.equal(published.crv, "Ed25519");
    assert.equal((await rest("POST", `${WEB_KEYS}/${kid}/_activate`)).status, 200);
    const fresh = await signIn(); // openid-client verified the EdDSA signature through the key set
    assert.equal(kidOf(fresh.idToken), kid);
    assert.equal(algOf(fresh.idToken), "EdDSA");
    const atHash = createHash("sha512")
      .update(fresh.accessToken)
      .digest()
      .subarray(0, 32)
      .toString("base64url");
    assert.equal(decodeJwt(fresh.idToken).at_hash, atHash);
    assert.equal(await verifiedKid(await jwtAccessToken()), kid);
  });

  it("another process on the database signs with the activated key within 5 s; `keys rotate` keeps the active key's algorithm", async () => {
    // A second key store with an event store of its own stands for another process.
    const other = new SigningKeys(
      platform.db,
      resolveMasterKey(platform.config),
      new EventStore(platform.db, projections),
    );
    const instanceId = platform.bootstrapResult!.instanceId;
    const before = (await other.active(instanceId)).kid;
    const created = await rest("POST", WEB_KEYS, { json: { ecdsa: { curve: "ECDSA_CURVE_P384" } } });
    const kid = created.json.details.id;
    assert.equal((await rest("POST", `${WEB_KEYS}/${kid}/_activate`)).status, 200);
    assert.equal((await other.active(instanceId)).kid, before, "its cache still holds the old view");
    // seen within the cache's 5 s (the bound scaled for a loaded machine)
    const started = Date.now();
    const bound = testTime(5_500);
    while ((await other.active(instanceId)).kid !== kid) {
      assert.ok(Date.now() - started < bound, "seen within the cache's 5 s");
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    assert.equal(algOf((await signIn()).idToken), "ES384");

    const rotated = await platform.oidc.keys.rotate(instanceId);
    assert.equal(rotated.alg, "ES384");
    assert.equal(await stateOf(rotated.kid), "STATE_ACTIVE");
    assert.equal(await stateOf(kid), "STATE_INACTIVE");
  });
});
