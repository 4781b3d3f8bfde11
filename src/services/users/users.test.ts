import assert from "node:assert/strict";
import { createPublicKey, generateKeyPairSync } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  ADMIN_PASSWORD,
  addMachineUser,
  addOrg,
  assertRejected,
  eventCount,
  freshBackend,
  grpcCall,
  type Json,
  restClient,
  startPlatform,
  type TestPlatform,
  tempDir,
} from "../../../test/helpers.ts";
import { startProcess } from "../../../test/process.ts";
import { addMachineEvent } from "../../domain/user/commands.ts";
import { PlatformUsers } from "../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import { newId } from "../../id.ts";

const USERS = "/resources/v3alpha/users";

describe("users", () => {
  let platform: TestPlatform;
  let owner: string; // IAM_OWNER token
  let orgId: string;

  const rest = restClient(
    () => platform,
    () => owner,
  );

  const human = (username: string, extra: Record<string, unknown> = {}) => ({
    username,
    human: {
      profile: { given_name: "Ada", family_name: "Lovelace" },
      email: { address: `${username}@example.com`, is_verified: true },
      ...extra,
    },
  });
  const machine = (username: string) => ({
    username,
    machine: { name: `${username} service`, access_token_type: "ACCESS_TOKEN_TYPE_JWT" },
  });
  const createUser = async (user: unknown, query = "", token?: string) => {
    const r = await rest("POST", `${USERS}${query}`, { json: user, token });
    assert.equal(r.status, 201, r.text);
    return r.json.details.id as string;
  };

  /** Never a password, hash or secret in an answer. */
  const assertNoSecrets = (text: string, ...secrets: string[]) => {
    assert.doesNotMatch(text, /password_hash|passwordHash|\$argon2|secret_hash|token_hash/);
    for (const secret of secrets) assert.ok(!text.includes(secret), "a secret leaked into a response");
  };

  before(async () => {
    platform = await startPlatform({ listen: true });
    orgId = platform.bootstrapResult!.orgId;
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
  });
  after(() => platform.stop());

  it("create → get → patch → search → action → delete (human)", async () => {
    const password = "Secret-Passw0rd!";
    const created = await rest("POST", USERS, {
      json: human("ada", {
        phone: { number: "+41 79 123 45 67", is_verified: false },
        password: { password },
      }),
    });
    assert.equal(created.status, 201, created.text);
    assertNoSecrets(created.text, password);
    const id = created.json.details.id;
    // The event stores only the argon2id hash.
    const [added] = await platform.db.query<{ payload: Json }>(
      "SELECT payload FROM events WHERE aggregate_id = $1 AND event_type = 'user.human.added'",
      [id],
    );
    assert.ok(!JSON.stringify(added.payload).includes(password), "no password in the event");
    assert.match(added.payload.password_hash, /^\$argon2id\$/);
    assert.deepEqual(created.json.details.resource_owner, { type: "OWNER_TYPE_ORG", id: orgId });

    let got = await rest("GET", `${USERS}/${id}`);
    assert.equal(got.status, 200, got.text);
    assertNoSecrets(got.text, password);
    const user = got.json.user;
    assert.equal(user.username, "ada");
    assert.equal(user.state, "USER_STATE_ACTIVE");
    assert.equal(user.login_names.length, 2);
    assert.equal(user.login_names[0], "ada");
    assert.match(user.login_names[1], /^ada@platform\./);
    assert.deepEqual(user.human.profile, {
      given_name: "Ada",
      family_name: "Lovelace",
      display_name: "Ada Lovelace",
    });
    assert.deepEqual(user.human.email, { address: "ada@example.com", is_verified: true });
    assert.deepEqual(user.human.phone, { number: "+41 79 123 45 67", is_verified: false });
    assert.equal(user.human.password_set, true);

    // Patch: only present fields change.
    const patched = await rest("PATCH", `${USERS}/${id}`, {
      json: { human: { profile: { nick_name: "countess", display_name: "" }, phone: { number: "" } } },
    });
    assert.equal(patched.status, 200, patched.text);
    assert.ok(BigInt(patched.json.details.sequence) > BigInt(user.details.sequence));
    got = await rest("GET", `${USERS}/${id}`);
    assert.deepEqual(got.json.user.human.profile, {
      given_name: "Ada",
      family_name: "Lovelace",
      nick_name: "countess",
    });
    assert.equal(got.json.user.human.phone, undefined);

    // A patch that changes nothing succeeds and stores nothing; bad patches store nothing either.
    const count = await eventCount(platform);
    for (const [json, message] of [
      [{ human: { profile: { preferred_language: "EN" } } }, /^user\.human\.profile\.preferred_language: /],
      [{ human: { profile: { given_name: "" } } }, /^user\.human\.profile\.given_name: must not be empty$/],
      [{ human: { email: { address: "nope" } } }, /^user\.human\.email\.address: must match/],
      [{ machine: { name: "robot" } }, /^user\.machine: /],
    ] as const) {
      const bad = await rest("PATCH", `${USERS}/${id}`, { json });
      assert.equal(bad.status, 400, bad.text);
      assert.match(bad.json.message, message);
    }
    const same = await rest("PATCH", `${USERS}/${id}`, {
      json: { username: "ada", human: { profile: { given_name: "Ada", nick_name: "countess" } } },
    });
    assert.equal(same.status, 200, same.text);
    assert.equal(same.json.details.sequence, patched.json.details.sequence);
    assert.equal((await rest("PATCH", `${USERS}/${id}`, { json: {} })).status, 200);
    assert.equal(await eventCount(platform), count);

    // Search by e-mail.
    const found = await rest("POST", `${USERS}/_search`, {
      json: [{ email: { address: "ADA@EXAMPLE", method: "TEXT_FILTER_METHOD_STARTS_WITH_IGNORE_CASE" } }],
    });
    assert.equal(found.status, 200, found.text);
    assert.deepEqual(
      found.json.result.map((u: Json) => u.details.id),
      [id],
    );
    assert.equal(found.json.details.total_result, "1");
    assertNoSecrets(found.text, password);

    // Actions.
    const lock = await rest("POST", `${USERS}/${id}/_lock`);
    assert.equal(lock.status, 200, lock.text);
    assert.equal((await rest("GET", `${USERS}/${id}`)).json.user.state, "USER_STATE_LOCKED");
    const locked = await rest("POST", `${USERS}/_search`, {
      json: [{ state: { state: "USER_STATE_LOCKED" } }],
    });
    assert.deepEqual(
      locked.json.result.map((u: Json) => u.details.id),
      [id],
    );

    // Delete.
    const deleted = await rest("DELETE", `${USERS}/${id}`);
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal((await rest("GET", `${USERS}/${id}`)).status, 404);
    // The username is free again.
    await createUser(human("ADA"));
  });

  it("state transitions: lock, unlock, deactivate, reactivate; invalid ones are FAILED_PRECONDITION", async () => {
    const id = await createUser(human("grace"));
    const action = (name: string) => rest("POST", `${USERS}/${id}/_${name}`);
    const state = async () => (await rest("GET", `${USERS}/${id}`)).json.user.state;
    const failed = (name: string) => assertRejected(platform, () => action(name), 400, 9);
    await failed("unlock");
    await failed("reactivate");
    assert.equal((await action("lock")).status, 200);
    await failed("lock");
    await failed("deactivate");
    assert.equal((await action("unlock")).status, 200);
    assert.equal(await state(), "USER_STATE_ACTIVE");
    assert.equal((await action("deactivate")).status, 200);
    assert.equal(await state(), "USER_STATE_INACTIVE");
    await failed("lock");
    await failed("deactivate");
    assert.equal((await action("reactivate")).status, 200);
    assert.equal(await state(), "USER_STATE_ACTIVE");
    assert.equal((await rest("POST", `${USERS}/${newId()}/_lock`)).status, 404);
  });

  it("usernames are unique per instance ignoring case; a username change releases the old one", async () => {
    const id = await createUser(human("Linus"));
    const before = await eventCount(platform);
    const taken = await rest("POST", USERS, { json: machine("linus") });
    assert.equal(taken.status, 409, taken.text);
    assert.equal(taken.json.code, 6);
    assert.equal(await eventCount(platform), before);

    const other = await createUser(machine("torvalds"));
    const clash = await rest("PATCH", `${USERS}/${other}`, { json: { username: "LINUS" } });
    assert.equal(clash.status, 409, clash.text);

    const renamed = await rest("PATCH", `${USERS}/${id}`, { json: { username: "linus2" } });
    assert.equal(renamed.status, 200, renamed.text);
    assert.equal((await rest("GET", `${USERS}/${id}`)).json.user.username, "linus2");
    await createUser(machine("linus"));
    // A case-only change keeps the claim.
    assert.equal((await rest("PATCH", `${USERS}/${id}`, { json: { username: "Linus2" } })).status, 200);
    assert.equal((await rest("POST", USERS, { json: machine("LINUS2") })).status, 409);
  });

  it("bad input on create is 400 naming the field, and stores nothing", async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ ...human("x"), username: "" }, /^user\.username: is required$/],
      [{ ...human("x"), username: "u".repeat(201) }, /^user\.username: must be at most 200 characters$/],
      [{ ...human("x"), username: "has space" }, /^user\.username: must match/],
      [{ ...human("x"), username: 42 }, /username/],
      [{ username: "x" }, /^user\.type: one of human, machine must be set$/],
      [
        { ...human("x"), human: { email: { address: "x@example.com" } } },
        /^user\.human\.profile: is required$/,
      ],
      [
        human("x", { profile: { given_name: "", family_name: "L" } }),
        /^user\.human\.profile\.given_name: is required$/,
      ],
      [
        human("x", { profile: { given_name: "A", family_name: "L".repeat(201) } }),
        /^user\.human\.profile\.family_name: must be at most 200 characters$/,
      ],
      [human("x", { email: { address: "not-an-address" } }), /^user\.human\.email\.address: must match/],
      [human("x", { email: { address: "a@b", is_verified: "yes" } }), /is_verified/],
      [human("x", { phone: { number: "call me" } }), /^user\.human\.phone\.number: must match/],
      [human("x", { password: { password: "short" } }), /^user\.human\.password\.password: does not meet/],
      [
        human("x", { password: { password: "alllowercase1!" } }),
        /^user\.human\.password\.password: .*uppercase/,
      ],
      [
        { username: "x", machine: { name: "m", access_token_type: "ACCESS_TOKEN_TYPE_OPAQUE" } },
        /^user\.machine\.access_token_type: unknown value "ACCESS_TOKEN_TYPE_OPAQUE"$/,
      ],
      [
        { username: "x", machine: { name: "m", access_token_type: 7 } },
        /^user\.machine\.access_token_type: must be a defined value$/,
      ],
      [{ username: "x", machine: { name: "" } }, /^user\.machine\.name: is required$/],
      [
        { username: "x", machine: { name: "m", description: "d".repeat(501) } },
        /^user\.machine\.description: /,
      ],
      [{ username: "x", machine: { name: "m" }, unknown_field: 1 }, /unknown_field/],
    ];
    const before = await eventCount(platform);
    for (const [body, message] of cases) {
      const r = await rest("POST", USERS, { json: body });
      assert.equal(r.status, 400, `${JSON.stringify(body)} → ${r.text}`);
      assert.equal(r.json.code, 3);
      assert.match(r.json.message, message);
      assert.ok(!r.text.includes("alllowercase1!"), "the password is not echoed");
    }
    const empty = await rest("POST", USERS);
    assert.equal(empty.status, 400);
    assert.match(empty.json.message, /^user: is required$/);
    assert.equal(await eventCount(platform), before);
  });

  it("set password: complexity policy, current password, never returned", async () => {
    const id = await createUser(human("hopper"));
    const before = await eventCount(platform);
    for (const [password, missing] of [
      ["Sh0rt!", "at least 8 characters"],
      ["nouppercase1!", "an uppercase letter"],
      ["NOLOWERCASE1!", "a lowercase letter"],
      ["NoDigits!!", "a digit"],
      ["NoSymbols123", "a symbol"],
    ]) {
      const r = await rest("POST", `${USERS}/${id}/_set_password`, { json: { password } });
      assert.equal(r.status, 400, r.text);
      assert.match(r.json.message, new RegExp(`^password\\.password: .*${missing}`));
      assert.ok(!r.text.includes(password));
    }
    const wrong = await rest("POST", `${USERS}/${id}/_set_password`, {
      json: { password: "Val1d-Password", current_password: "Wrong-Passw0rd" },
    });
    assert.equal(wrong.status, 400);
    assert.match(wrong.json.message, /^password\.current_password: /);
    assert.equal(await eventCount(platform), before);

    const set = await rest("POST", `${USERS}/${id}/_set_password`, {
      json: { password: "Val1d-Password", change_required: true },
    });
    assert.equal(set.status, 200, set.text);
    assertNoSecrets(set.text, "Val1d-Password");
    const got = await rest("GET", `${USERS}/${id}`);
    assert.equal(got.json.user.human.password_set, true);
    assert.equal(got.json.user.human.password_change_required, true);
    assertNoSecrets(got.text, "Val1d-Password");
    const events = await platform.db.query<{ payload: unknown }>(
      "SELECT payload FROM events WHERE aggregate_id = $1",
      [id],
    );
    assert.ok(!JSON.stringify(events).includes("Val1d-Password"), "no password in event payloads");

    const right = await rest("POST", `${USERS}/${id}/_set_password`, {
      json: { password: "An0ther-Password", current_password: "Val1d-Password" },
    });
    assert.equal(right.status, 200, right.text);

    const machineId = await createUser(machine("no-password"));
    const r = await rest("POST", `${USERS}/${machineId}/_set_password`, {
      json: { password: "Val1d-Password" },
    });
    assert.equal(r.status, 400);
    assert.equal(r.json.code, 9);
  });

  it("patch changes only the fields present: profile, e-mail, phone, machine, metadata (REST and gRPC)", async () => {
    const id = await createUser({
      username: "presence",
      human: {
        profile: {
          given_name: "Grace",
          family_name: "Hopper",
          display_name: "Grace Hopper",
          nick_name: "amazing",
          preferred_language: "en",
        },
        email: { address: "grace@example.com", is_verified: true },
        phone: { number: "+1 555 0100", is_verified: true },
      },
    });
    const read = async () => {
      const user = (await rest("GET", `${USERS}/${id}`)).json.user;
      return { username: user.username, human: user.human, metadata: user.metadata };
    };
    const patch = async (json: unknown) => {
      const r = await rest("PATCH", `${USERS}/${id}`, { json });
      assert.equal(r.status, 200, r.text);
    };
    const grpc = (method: string, request: Json) =>
      grpcCall(platform, owner, PlatformUsers, method, { id, ...request });
    let expected = await read();

    await patch({ human: { profile: { nick_name: "Amazing Grace" } } });
    expected = {
      ...expected,
      human: { ...expected.human, profile: { ...expected.human.profile, nick_name: "Amazing Grace" } },
    };
    assert.deepEqual(await read(), expected);
    // Verification alone: the number stays (it used to be removed, an empty number meaning "remove").
    await patch({ human: { phone: { is_verified: false } } });
    expected = {
      ...expected,
      human: { ...expected.human, phone: { number: "+1 555 0100", is_verified: false } },
    };
    assert.deepEqual(await read(), expected);
    // The same address again keeps its verification; a new one is unverified unless said otherwise.
    await patch({ human: { email: { address: "grace@example.com" } } });
    assert.deepEqual(await read(), expected);
    await patch({ human: { email: { address: "grace@navy.example" } } });
    expected = {
      ...expected,
      human: { ...expected.human, email: { address: "grace@navy.example", is_verified: false } },
    };
    assert.deepEqual(await read(), expected);
    // Binary protobuf: each field alone.
    await grpc("PatchUser", { user: { human: { email: { is_verified: true } } } });
    expected = {
      ...expected,
      human: { ...expected.human, email: { address: "grace@navy.example", is_verified: true } },
    };
    assert.deepEqual(await read(), expected);
    await grpc("PatchUser", { user: { human: { phone: { number: "+1 555 0199", is_verified: true } } } });
    expected = {
      ...expected,
      human: { ...expected.human, phone: { number: "+1 555 0199", is_verified: true } },
    };
    assert.deepEqual(await read(), expected);
    await grpc("PatchUser", { user: { human: { profile: { display_name: "" } } } });
    const { display_name: _, ...profile } = expected.human.profile;
    expected = { ...expected, human: { ...expected.human, profile } };
    assert.deepEqual(await read(), expected);
    await grpc("PatchUser", { user: { username: "presence2" } });
    expected = { ...expected, username: "presence2" };
    assert.deepEqual(await read(), expected);

    // Removing the phone, and what cannot be asked.
    await assertRejected(
      platform,
      () =>
        rest("PATCH", `${USERS}/${id}`, { json: { human: { phone: { number: "", is_verified: true } } } }),
      400,
      3,
      "user.human.phone.is_verified: cannot be true while the number is removed (empty)",
    );
    await patch({ human: { phone: { number: "" } } });
    const { phone: __, ...withoutPhone } = expected.human;
    expected = { ...expected, human: withoutPhone };
    assert.deepEqual(await read(), expected);
    await assertRejected(
      platform,
      () => rest("PATCH", `${USERS}/${id}`, { json: { human: { phone: { is_verified: true } } } }),
      400,
      9,
      "the user has no phone number to mark as verified",
    );

    // Metadata: the entries given change, the others stay (over gRPC too).
    const b64 = (v: string) => Buffer.from(v).toString("base64");
    assert.equal(
      (await rest("PATCH", `${USERS}/${id}/metadata`, { json: { entries: { a: b64("1"), b: b64("2") } } }))
        .status,
      200,
    );
    await grpc("SetUserMetadata", { metadata: { entries: { a: b64("3") } } });
    assert.deepEqual((await read()).metadata, { a: b64("3"), b: b64("2") });
    await grpc("SetUserMetadata", { metadata: { entries: { b: "" } } });
    assert.deepEqual(await read(), { ...expected, metadata: { a: b64("3") } });

    // Machine users: one field at a time; BEARER (the zero value) is present in binary protobuf too.
    const robot = await createUser({
      username: "presence-robot",
      machine: { name: "Robot", description: "Builds", access_token_type: "ACCESS_TOKEN_TYPE_JWT" },
    });
    const machineOf = async () => (await rest("GET", `${USERS}/${robot}`)).json.user.machine;
    const machine = await machineOf();
    assert.equal(
      (await rest("PATCH", `${USERS}/${robot}`, { json: { machine: { name: "Robot 2" } } })).status,
      200,
    );
    assert.deepEqual(await machineOf(), { ...machine, name: "Robot 2" });
    await grpcCall(platform, owner, PlatformUsers, "PatchUser", {
      id: robot,
      user: { machine: { access_token_type: "ACCESS_TOKEN_TYPE_BEARER" } },
    });
    assert.deepEqual(await machineOf(), {
      ...machine,
      name: "Robot 2",
      access_token_type: "ACCESS_TOKEN_TYPE_BEARER",
    });
  });

  it("metadata: set, read, remove with an empty value; unchanged values add no event", async () => {
    const id = await createUser(machine("meta"));
    const b64 = (s: string) => Buffer.from(s).toString("base64");
    let r = await rest("PATCH", `${USERS}/${id}/metadata`, {
      json: { entries: { team: b64("identity"), floor: b64("3") } },
    });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual((await rest("GET", `${USERS}/${id}`)).json.user.metadata, {
      floor: b64("3"),
      team: b64("identity"),
    });
    const before = await eventCount(platform);
    r = await rest("PATCH", `${USERS}/${id}/metadata`, { json: { entries: { team: b64("identity") } } });
    assert.equal(r.status, 200);
    assert.equal(await eventCount(platform), before);
    r = await rest("PATCH", `${USERS}/${id}/metadata`, { json: { entries: { floor: "" } } });
    assert.equal(r.status, 200);
    assert.deepEqual((await rest("GET", `${USERS}/${id}`)).json.user.metadata, { team: b64("identity") });
    r = await rest("PATCH", `${USERS}/${id}/metadata`, { json: { entries: { "": b64("x") } } });
    assert.equal(r.status, 400);
    assert.match(r.json.message, /^metadata\.entries: /);
  });

  it("a machine user's PAT created through the API authenticates; after removal it is 401", async () => {
    const id = await createUser(machine("robot"));
    const created = await rest("POST", `${USERS}/${id}/pats`, { json: {} });
    assert.equal(created.status, 201, created.text);
    const { token, pat_id: patId } = created.json;
    assert.ok(token.length >= 40);
    assert.equal(created.json.details.id, patId);
    // Authenticates (the robot may read itself once it has a role; here: any authenticated call).
    let r = await rest("GET", "/settings/v3alpha/languages", { token });
    assert.equal(r.status, 200, r.text);
    r = await rest("GET", `${USERS}/${id}`, { token });
    assert.equal(r.status, 200, "without user.read a user still reads itself");
    const stranger = await createUser(machine("stranger"));
    r = await rest("GET", `${USERS}/${stranger}`, { token });
    assert.equal(r.status, 404, "authenticated, but without user.read: another user is unknown to it");
    const got = await rest("GET", `${USERS}/${id}`);
    assertNoSecrets(got.text, token);
    const patEvents = JSON.stringify(
      await platform.db.query("SELECT payload FROM events WHERE aggregate_id = $1", [id]),
    );
    assert.ok(!patEvents.includes(token), "only the token's hash is stored");

    const removed = await rest("DELETE", `${USERS}/${id}/pats/${patId}`);
    assert.equal(removed.status, 200, removed.text);
    r = await rest("GET", "/settings/v3alpha/languages", { token });
    assert.equal(r.status, 401);
    assert.equal((await rest("DELETE", `${USERS}/${id}/pats/${patId}`)).status, 404);

    // Expired and expiring tokens.
    const past = await rest("POST", `${USERS}/${id}/pats`, {
      json: { expiration_date: "2001-01-01T00:00:00Z" },
    });
    assert.equal(past.status, 400);
    assert.match(past.json.message, /^pat\.expiration_date: must be in the future$/);
    const future = await rest("POST", `${USERS}/${id}/pats`, {
      json: { expiration_date: new Date(Date.now() + 3_600_000).toISOString() },
    });
    assert.equal(future.status, 201);
    assert.equal(
      (await rest("GET", "/settings/v3alpha/languages", { token: future.json.token })).status,
      200,
    );

    // Locked users cannot use their token.
    await rest("POST", `${USERS}/${id}/_lock`);
    assert.equal(
      (await rest("GET", "/settings/v3alpha/languages", { token: future.json.token })).status,
      401,
    );
  });

  it("machine secret and keys; credentials only for machine users", async () => {
    const id = await createUser(machine("svc-account"));
    const secret = await rest("POST", `${USERS}/${id}/_generate_secret`);
    assert.equal(secret.status, 200, secret.text);
    assert.equal(secret.json.client_id, "svc-account");
    const clientSecret = secret.json.client_secret as string;
    assert.ok(clientSecret.length >= 40);
    const got = await rest("GET", `${USERS}/${id}`);
    assert.equal(got.json.user.machine.has_secret, true);
    assert.equal(got.json.user.machine.access_token_type, "ACCESS_TOKEN_TYPE_JWT");
    assertNoSecrets(got.text, clientSecret);
    const searched = await rest("POST", `${USERS}/_search`, { json: [{ ids: { ids: [id] } }] });
    assertNoSecrets(searched.text, clientSecret);
    const again = await rest("POST", `${USERS}/${id}/_generate_secret`);
    assert.notEqual(again.json.client_secret, clientSecret);
    const secretEvents = JSON.stringify(
      await platform.db.query("SELECT payload FROM events WHERE aggregate_id = $1", [id]),
    );
    assert.ok(!secretEvents.includes(clientSecret) && !secretEvents.includes(again.json.client_secret));

    // Server-generated key pair: the private key comes back once, only the public key is stored.
    const key = await rest("POST", `${USERS}/${id}/keys`, { json: {} });
    assert.equal(key.status, 201, key.text);
    const file = JSON.parse(Buffer.from(key.json.key_content, "base64").toString("utf8"));
    assert.equal(file.type, "serviceaccount");
    assert.equal(file.keyId, key.json.key_id);
    assert.equal(file.userId, id);
    assert.match(file.key, /^-----BEGIN PRIVATE KEY-----/);
    const stored = await platform.db.query<{ public_key: string }>(
      "SELECT public_key FROM user_keys WHERE user_id = $1 AND id = $2",
      [id, key.json.key_id],
    );
    assert.equal(
      stored[0].public_key.trim(),
      createPublicKey(file.key).export({ type: "spki", format: "pem" }).toString().trim(),
    );
    assert.ok(!JSON.stringify(await platform.db.query("SELECT payload FROM events")).includes("PRIVATE KEY"));

    // Caller-provided public key: no key content.
    const { publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const own = await rest("POST", `${USERS}/${id}/keys`, {
      json: {
        public_key: publicKey.export({ type: "spki", format: "pem" }),
        expiration_date: "2099-01-01T00:00:00Z",
      },
    });
    assert.equal(own.status, 201, own.text);
    assert.equal(own.json.key_content, "");
    const bad = await rest("POST", `${USERS}/${id}/keys`, { json: { public_key: "not a key" } });
    assert.equal(bad.status, 400);
    assert.match(bad.json.message, /^key\.public_key: /);

    assert.equal((await rest("DELETE", `${USERS}/${id}/keys/${own.json.key_id}`)).status, 200);
    assert.equal((await rest("DELETE", `${USERS}/${id}/keys/${own.json.key_id}`)).status, 404);
    const keys = await platform.db.query("SELECT id FROM user_keys WHERE user_id = $1", [id]);
    assert.equal(keys.length, 1);

    // Humans have no machine credentials.
    const humanId = await createUser(human("no-credentials"));
    const before = await eventCount(platform);
    for (const [method, path] of [
      ["POST", "_generate_secret"],
      ["POST", "keys"],
      ["POST", "pats"],
    ]) {
      const r = await rest(method, `${USERS}/${humanId}/${path}`, {
        json: path === "_generate_secret" ? undefined : {},
      });
      assert.equal(r.status, 400, `${path}: ${r.text}`);
      assert.equal(r.json.code, 9);
    }
    assert.equal(await eventCount(platform), before);
  });

  it("search: only users the caller may read; ORG_OWNER of org A sees nothing of org B", async () => {
    const orgA = await addOrg(platform, "Org A");
    const orgB = await addOrg(platform, "Org B");
    const { token: ownerA, userId: ownerAId } = await addMachineUser(platform, {
      username: "owner-a",
      orgId: orgA,
      membership: { contextType: "org", contextId: orgA, roles: ["ORG_OWNER"] },
    });
    const inA = await createUser(human("alice-a"), `?ctx.org_id=${orgA}`, ownerA);
    const inB = await createUser(human("bob-b"), `?ctx.org_id=${orgB}`);
    // ORG_OWNER of A cannot create in B nor in the default org.
    assert.equal(
      (await rest("POST", `${USERS}?ctx.org_id=${orgB}`, { json: machine("x-b"), token: ownerA })).status,
      403,
    );
    assert.equal((await rest("POST", USERS, { json: machine("x-default"), token: ownerA })).status, 403);

    const search = async (token: string, query = "", filters: unknown = []) => {
      const r = await rest("POST", `${USERS}/_search${query}`, { json: filters, token });
      assert.equal(r.status, 200, r.text);
      return r.json;
    };
    const seenByA = await search(ownerA);
    assert.deepEqual(seenByA.result.map((u: Json) => u.details.id).sort(), [inA, ownerAId].sort());
    assert.ok(seenByA.result.every((u: Json) => u.details.resource_owner.id === orgA));
    assert.equal((await search(ownerA, `?ctx.org_id=${orgB}`)).result.length, 0);
    assert.equal((await search(ownerA, "", [{ ids: { ids: [inB] } }])).result.length, 0);
    assert.equal((await rest("GET", `${USERS}/${inA}`, { token: ownerA })).status, 200);

    // A user of an organization the caller may not read is unknown to it (404, like an unknown ID;
    // IDs cannot be probed), whatever the operation; nothing is stored.
    const before = await eventCount(platform);
    for (const [method, path, json] of [
      ["GET", "", undefined],
      ["PATCH", "", { username: "taken-over" }],
      ["DELETE", "", undefined],
      ["POST", "/_lock", undefined],
      ["POST", "/_deactivate", undefined],
      ["POST", "/_set_password", { password: "Take-0ver!" }],
      ["PATCH", "/metadata", { entries: { k: "dg==" } }],
      ["POST", "/pats", {}],
      ["POST", "/keys", {}],
      ["POST", "/_generate_secret", undefined],
    ] as const) {
      const r = await rest(method, `${USERS}/${inB}${path}`, { json, token: ownerA });
      assert.equal(r.status, 404, `${method} ${path}: ${r.text}`);
      assert.deepEqual(r.json, { code: 5, message: "user not found", details: [] });
    }
    assert.equal(await eventCount(platform), before);
    // With user.read but not user.write in org B: 403.
    const { token: viewerB } = await addMachineUser(platform, {
      username: "viewer-b",
      membership: { contextType: "org", contextId: orgB, roles: ["ORG_OWNER_VIEWER"] },
    });
    assert.equal((await rest("GET", `${USERS}/${inB}`, { token: viewerB })).status, 200);
    const beforeViewer = await eventCount(platform);
    const denied = await rest("PATCH", `${USERS}/${inB}`, { json: { username: "x" }, token: viewerB });
    assert.equal(denied.status, 403, denied.text);
    assert.equal(denied.json.code, 7);
    assert.equal((await rest("POST", `${USERS}/${inB}/_lock`, { token: viewerB })).status, 403);
    assert.equal(await eventCount(platform), beforeViewer);

    // The instance owner sees both; ctx.org_id narrows.
    const all = await search(owner, "", [{ org: { org_id: orgB } }]);
    assert.deepEqual(
      all.result.map((u: Json) => u.details.id),
      [inB],
    );
    const narrowed = await search(owner, `?ctx.org_id=${orgA}`);
    assert.deepEqual(narrowed.result.map((u: Json) => u.details.id).sort(), [inA, ownerAId].sort());
  });

  it("search paging: default 100, descending by creation, limit 1000 accepted, 1001 rejected", async () => {
    const instanceId = platform.bootstrapResult!.instanceId;
    const pageOrg = await addOrg(platform, "Paging Org");
    const ids: string[] = [];
    await platform.eventStore.push({ instanceId, creator: "test" }, async () =>
      Array.from({ length: 120 }, (_, i) => {
        const id = newId();
        ids.push(id);
        return addMachineEvent(id, pageOrg, {
          username: `bulk-${i}`,
          name: `bulk ${i}`,
          access_token_type: 0,
        });
      }),
    );
    // Created in one transaction: same creation time, so the ID (time-ordered) breaks the tie.
    const expected = [...ids].reverse();
    let r = await rest("POST", `${USERS}/_search?ctx.org_id=${pageOrg}`);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.result.length, 100);
    assert.equal(r.json.details.applied_limit, 100);
    assert.equal(r.json.details.total_result, "120");
    assert.equal(r.json.details.end_of_list, false);
    assert.deepEqual(
      r.json.result.map((u: Json) => u.details.id),
      expected.slice(0, 100),
    );
    r = await rest("POST", `${USERS}/_search?ctx.org_id=${pageOrg}&query.offset=100&query.asc=false`);
    assert.deepEqual(
      r.json.result.map((u: Json) => u.details.id),
      expected.slice(100),
    );
    assert.equal(r.json.details.end_of_list, true);
    r = await rest("POST", `${USERS}/_search?ctx.org_id=${pageOrg}&query.asc=true&query.limit=3`);
    assert.deepEqual(
      r.json.result.map((u: Json) => u.details.id),
      ids.slice(0, 3),
    );
    r = await rest("POST", `${USERS}/_search?query.limit=1000`);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.details.applied_limit, 1000);
    assert.ok(r.json.result.length > 120);
    // Users created one after another, newest first.
    const a = await createUser(machine("order-1"), `?ctx.org_id=${pageOrg}`);
    const b = await createUser(machine("order-2"), `?ctx.org_id=${pageOrg}`);
    r = await rest("POST", `${USERS}/_search?ctx.org_id=${pageOrg}&query.limit=2`);
    assert.deepEqual(
      r.json.result.map((u: Json) => u.details.id),
      [b, a],
    );
    r = await rest("POST", `${USERS}/_search?query.limit=1001`);
    assert.equal(r.status, 400);
    assert.equal(r.json.code, 3);
    assert.match(r.json.message, /^query\.limit: /);
    r = await rest("POST", `${USERS}/_search`, { json: [{ username: { username: "x", method: 99 } }] });
    assert.equal(r.status, 400);
    assert.match(r.json.message, /^filters\[0\]\.username\.method: /);
  });

  it("is served over gRPC as /platform.resources.user.v3alpha.PlatformUsers/CreateUser", async () => {
    assert.equal(PlatformUsers.method.createUser.name, "CreateUser");
    assert.equal(PlatformUsers.typeName, "platform.resources.user.v3alpha.PlatformUsers");
    const client = createClient(PlatformUsers, createGrpcTransport({ baseUrl: platform.url }));
    const headers = { authorization: `Bearer ${owner}` };
    const created = await client.createUser(
      { user: { username: "grpc-user", type: { case: "machine", value: { name: "gRPC" } } } },
      { headers },
    );
    const got = await client.getUser({ id: created.details!.id }, { headers });
    assert.equal(got.user?.username, "grpc-user");
    await assert.rejects(
      client.createUser(
        { user: { username: "", type: { case: "machine", value: { name: "x" } } } },
        { headers },
      ),
      (e) =>
        e instanceof ConnectError && e.code === Code.InvalidArgument && /user\.username/.test(e.rawMessage),
    );
    // The bootstrap admin's login is unaffected by all of this.
    assert.ok(ADMIN_PASSWORD);
  });
});

describe("users: secrets never reach the logs", () => {
  it("passwords, client secrets, tokens and hashes appear in no log line, even at trace level", async () => {
    const backend = await freshBackend();
    const patPath = path.join(tempDir("pat-"), "admin-client.pat");
    const adminPassword = "Admin-Passw0rd!";
    const server = await startProcess({
      ...backend.env,
      PLATFORM_PORT: "0",
      PLATFORM_LOG_LEVEL: "trace",
      PLATFORM_FIRSTINSTANCE_ADMIN_PASSWORD: adminPassword,
      PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath,
    });
    const secrets = [adminPassword];
    try {
      const token = readFileSync(patPath, "utf8").trim();
      secrets.push(token);
      const call = restClient(server, () => token);
      const first = "First-Passw0rd!";
      const second = "Second-Passw0rd!";
      const wrong = "Wrong-Passw0rd!";
      secrets.push(first, second, wrong);
      const created = await call("POST", USERS, {
        json: {
          username: "logged",
          human: {
            profile: { given_name: "L", family_name: "G" },
            email: { address: "logged@example.com" },
            password: { password: first },
          },
        },
      });
      assert.equal(created.status, 201, JSON.stringify(created.json));
      const id = created.json.details.id;
      const weak = await call("POST", USERS, {
        json: {
          username: "weak",
          human: {
            profile: { given_name: "W", family_name: "K" },
            email: { address: "weak@example.com" },
            password: { password: "weakpassword" },
          },
        },
      });
      assert.equal(weak.status, 400);
      secrets.push("weakpassword");
      const setWrong = await call("POST", `${USERS}/${id}/_set_password`, {
        json: {
          password: second,
          current_password: wrong,
        },
      });
      assert.equal(setWrong.status, 400);
      const set = await call("POST", `${USERS}/${id}/_set_password`, {
        json: {
          password: second,
          current_password: first,
        },
      });
      assert.equal(set.status, 200, JSON.stringify(set.json));
      const wrongLogin = await call("POST", "/resources/v3alpha/sessions", {
        json: {
          checks: { user: { login_name: "logged" }, password: { password: wrong } },
        },
      });
      assert.equal(wrongLogin.status, 400);
      const session = await call("POST", "/resources/v3alpha/sessions", {
        json: {
          checks: { user: { login_name: "logged" }, password: { password: second } },
        },
      });
      assert.equal(session.status, 201, JSON.stringify(session.json));
      secrets.push(session.json.session_token);

      const robot = await call("POST", USERS, {
        json: { username: "logged-robot", machine: { name: "robot" } },
      });
      const robotId = robot.json.details.id;
      const secret = await call("POST", `${USERS}/${robotId}/_generate_secret`);
      secrets.push(secret.json.client_secret);
      const pat = await call("POST", `${USERS}/${robotId}/pats`, { json: {} });
      secrets.push(pat.json.token);
      assert.equal((await call("GET", "/settings/v3alpha/languages", { token: pat.json.token })).status, 200);
      await call("DELETE", `${USERS}/${robotId}/pats/${pat.json.pat_id}`);
      assert.equal((await call("GET", "/settings/v3alpha/languages", { token: pat.json.token })).status, 401);
    } finally {
      await server.stop();
      await backend.cleanup();
    }
    const logs = `${server.stdout()}\n${server.stderr()}`;
    assert.ok(logs.split("\n").length > 20, "trace logging was on");
    for (const secret of secrets) assert.ok(!logs.includes(secret), "a secret reached the logs");
    assert.doesNotMatch(logs, /\$argon2/);
  });
});
