import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  addMachineUser,
  assertRpcError,
  grpcCall,
  type Json,
  type RestReply,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { type Credential, Flags, SoftAuthenticator } from "../../../test/webauthn.ts";
import { hashPassword } from "../../crypto/password.ts";
import { addHumanEvent } from "../../domain/user/commands.ts";
import { USER, UserEvent } from "../../domain/user/events.ts";
import { PlatformSessions } from "../../gen/platform/resources/session/v3alpha/session_service_pb.ts";
import { PlatformUsers } from "../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import { newId } from "../../id.ts";

const USERS = "/resources/v3alpha/users";
const SESSIONS = "/resources/v3alpha/sessions";

/**
 * Passkeys and security keys through the users API (registration, list, removal) and the sessions API's
 * `webauthn` challenge and check, with a software authenticator: every refusal stores nothing but the
 * counted failure.
 */
describe("passkeys and security keys", () => {
  let platform: TestPlatform;
  let owner: string;
  let orgId: string;
  let origin: string;
  const rest = restClient(
    () => platform,
    () => owner,
  );

  async function addHuman(username: string): Promise<string> {
    const userId = newId();
    await platform.eventStore.push(
      { instanceId: platform.bootstrapResult!.instanceId, creator: "test" },
      async () => [
        addHumanEvent(userId, orgId, {
          username,
          profile: { given_name: "Pat", family_name: username, display_name: `Pat ${username}` },
          email: { address: `${username}@example.com`, is_verified: true },
          password_hash: await hashPassword("Password1!"),
        }),
      ],
    );
    return userId;
  }

  async function userEvents(userId: string, type: string): Promise<number> {
    const rows = await platform.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM events WHERE aggregate_type = $1 AND aggregate_id = $2 AND event_type = $3",
      [USER, userId, type],
    );
    return Number(rows[0].n);
  }

  async function eventTotal(): Promise<number> {
    const rows = await platform.db.query<{ n: number }>("SELECT count(*)::int AS n FROM events");
    return Number(rows[0].n);
  }

  /** A registration started and answered by `authenticator` (verified unless the caller spoils it). */
  async function register(
    userId: string,
    authenticator: SoftAuthenticator,
    options: { type?: string; name?: string } = {},
  ): Promise<{ passkeyId: string; credential: Credential; created: RestReply }> {
    const created = await rest("POST", `${USERS}/${userId}/passkeys`, {
      json: options.type ? { type: options.type } : {},
    });
    assert.equal(created.status, 201, created.text);
    const answer = authenticator.register(created.json.public_key_credential_creation_options);
    const verified = await rest("POST", `${USERS}/${userId}/passkeys/${created.json.passkey_id}/_verify`, {
      json: { public_key_credential: answer.json, name: options.name ?? "Laptop" },
    });
    assert.equal(verified.status, 200, verified.text);
    authenticator.keep(answer.credential);
    return { passkeyId: created.json.passkey_id, credential: answer.credential, created };
  }

  before(async () => {
    platform = await startPlatform({ listen: true, env: { PLATFORM_MAX_PASSWORD_ATTEMPTS: "100" } });
    orgId = platform.bootstrapResult!.orgId;
    origin = platform.url;
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
  });
  after(() => platform.stop());

  it("registers passkeys: the options, refusals storing nothing, names at their limits, list and removal", async () => {
    const userId = await addHuman("pk-register");
    const authenticator = new SoftAuthenticator(origin);
    const created = await rest("POST", `${USERS}/${userId}/passkeys`, {
      json: { authenticator: "PASSKEY_AUTHENTICATOR_PLATFORM" },
    });
    assert.equal(created.status, 201, created.text);
    const options = created.json.public_key_credential_creation_options;
    assert.equal(options.rp.id, "localhost");
    assert.ok(options.rp.name.length > 0);
    assert.equal(options.user.name, "pk-register");
    assert.equal(options.user.id, Buffer.from(userId).toString("base64url"));
    assert.equal(options.attestation, "none");
    assert.deepEqual(options.excludeCredentials, []);
    assert.equal(options.authenticatorSelection.residentKey, "required");
    assert.equal(options.authenticatorSelection.userVerification, "required");
    assert.equal(options.authenticatorSelection.authenticatorAttachment, "platform");
    assert.equal(created.json.details.id, created.json.passkey_id);
    const path = `${USERS}/${userId}/passkeys/${created.json.passkey_id}/_verify`;

    // Each wrong answer: 400, nothing stored, the registration still pending.
    const refusals: Array<[string, Parameters<SoftAuthenticator["register"]>[1], RegExp]> = [
      ["another origin", { origin: "https://evil.example" }, /origin/i],
      ["another RP ID", { rpId: "evil.example" }, /RP ID/i],
      ["another challenge", { challenge: Buffer.from("other").toString("base64url") }, /challenge/i],
      ["no user verification", { flags: Flags.UP }, /verif/i],
      ["an assertion instead", { type: "webauthn.get" }, /type/i],
    ];
    for (const [what, spoil, message] of refusals) {
      const before = await eventTotal();
      const answer = authenticator.register(options, spoil);
      const reply = await rest("POST", path, { json: { public_key_credential: answer.json, name: "Key" } });
      assertRpcError(reply, 400, 3, message);
      assert.equal(await eventTotal(), before, `${what}: nothing stored`);
    }
    // Names: empty and 201 characters are refused, 200 accepted.
    const good = authenticator.register(options);
    for (const name of ["", "x".repeat(201)]) {
      const before = await eventTotal();
      const reply = await rest("POST", path, { json: { public_key_credential: good.json, name } });
      assertRpcError(reply, 400, 3, /name/);
      assert.equal(await eventTotal(), before);
    }
    const longName = "ü".repeat(200);
    const verified = await rest("POST", path, { json: { public_key_credential: good.json, name: longName } });
    assert.equal(verified.status, 200, verified.text);
    authenticator.keep(good.credential);
    // Verified once: again is FAILED_PRECONDITION.
    const again = await rest("POST", path, { json: { public_key_credential: good.json, name: "Again" } });
    assertRpcError(again, 400, 9);
    // Unknown passkey: 404.
    const unknown = await rest("POST", `${USERS}/${userId}/passkeys/${newId()}/_verify`, {
      json: { public_key_credential: good.json, name: "Key" },
    });
    assertRpcError(unknown, 404, 5);

    // A second credential (a security key): the first is excluded, presence is enough.
    const keyAuthenticator = new SoftAuthenticator(origin, Flags.UP);
    const second = await rest("POST", `${USERS}/${userId}/passkeys`, { json: { type: "PASSKEY_TYPE_U2F" } });
    assert.equal(second.status, 201, second.text);
    const secondOptions = second.json.public_key_credential_creation_options;
    assert.deepEqual(
      secondOptions.excludeCredentials.map((c: Json) => c.id),
      [good.credential.id.toString("base64url")],
    );
    assert.equal(secondOptions.authenticatorSelection.userVerification, "discouraged");
    assert.equal(secondOptions.authenticatorSelection.residentKey, "discouraged");
    const keyAnswer = keyAuthenticator.register(secondOptions);
    const keyVerified = await rest("POST", `${USERS}/${userId}/passkeys/${second.json.passkey_id}/_verify`, {
      json: { public_key_credential: keyAnswer.json, name: "YubiKey" },
    });
    assert.equal(keyVerified.status, 200, keyVerified.text);

    // A pending third one, then the list: names, states, types; never a key.
    const pending = await rest("POST", `${USERS}/${userId}/passkeys`, { json: {} });
    const list = await rest("GET", `${USERS}/${userId}/passkeys`);
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(
      list.json.passkeys.map((p: Json) => [p.passkey_id, p.name, p.state, p.type]),
      [
        [created.json.passkey_id, longName, "PASSKEY_STATE_ACTIVE", "PASSKEY_TYPE_PASSKEY"],
        [second.json.passkey_id, "YubiKey", "PASSKEY_STATE_ACTIVE", "PASSKEY_TYPE_U2F"],
        [pending.json.passkey_id, "", "PASSKEY_STATE_PENDING", "PASSKEY_TYPE_PASSKEY"],
      ],
    );
    assert.ok(list.json.passkeys[0].creation_date);
    assert.doesNotMatch(list.text, new RegExp(good.credential.id.toString("base64url")));
    assert.doesNotMatch(list.text, /public_key"|challenge/);

    // A domain that is not the instance's: 400, nothing stored.
    const before = await eventTotal();
    const foreign = await rest("POST", `${USERS}/${userId}/passkeys`, { json: { domain: "evil.example" } });
    assertRpcError(foreign, 400, 3, /passkey\.domain/);
    assert.equal(await eventTotal(), before);

    // Removal: gone from the list; unknown: 404. Through Connect (gRPC) as well.
    const removed = await rest("DELETE", `${USERS}/${userId}/passkeys/${second.json.passkey_id}`);
    assert.equal(removed.status, 200, removed.text);
    assertRpcError(await rest("DELETE", `${USERS}/${userId}/passkeys/${second.json.passkey_id}`), 404, 5);
    const listed = await grpcCall(platform, owner, PlatformUsers, "ListPasskeys", { id: userId });
    assert.deepEqual(
      listed.passkeys.map((p: Json) => p.passkey_id),
      [created.json.passkey_id, pending.json.passkey_id],
    );
    await grpcCall(platform, owner, PlatformUsers, "RemovePasskey", {
      id: userId,
      passkey_id: pending.json.passkey_id,
    });
    assert.equal(await userEvents(userId, UserEvent.passkeyRemoved), 2);

    // A registration unanswered past its 5 minutes: refused, and removed by the next registration.
    const stale = await rest("POST", `${USERS}/${userId}/passkeys`, { json: {} });
    await platform.db.query(
      "UPDATE user_factors SET created_at = created_at - interval '301 seconds' WHERE user_id = $1 AND id = $2",
      [userId, stale.json.passkey_id],
    );
    const late = authenticator.register(stale.json.public_key_credential_creation_options);
    const expired = await rest("POST", `${USERS}/${userId}/passkeys/${stale.json.passkey_id}/_verify`, {
      json: { public_key_credential: late.json, name: "Late" },
    });
    assertRpcError(expired, 400, 9, /expired/);
    const next = await rest("POST", `${USERS}/${userId}/passkeys`, { json: {} });
    assert.equal(next.status, 201, next.text);
    const after = await rest("GET", `${USERS}/${userId}/passkeys`);
    assert.deepEqual(
      after.json.passkeys.map((p: Json) => p.passkey_id),
      [created.json.passkey_id, next.json.passkey_id],
    );
  });

  it("a caller without user.read does not see another user's passkeys, nor starts one", async () => {
    const userId = await addHuman("pk-foreign");
    const nobody = await addMachineUser(platform, { username: "pk-nobody" });
    const before = await eventTotal();
    const foreign = await rest("GET", `${USERS}/${userId}/passkeys`, { token: nobody.token });
    assertRpcError(foreign, 404, 5);
    const start = await rest("POST", `${USERS}/${userId}/passkeys`, { token: nobody.token, json: {} });
    assertRpcError(start, 404, 5);
    assert.equal(await eventTotal(), before);
  });

  it("sessions: the webauthn challenge and check; every wrong assertion refused and counted, nothing else stored", async () => {
    const userId = await addHuman("pk-session");
    const otherId = await addHuman("pk-other");
    const authenticator = new SoftAuthenticator(origin);
    const { credential, passkeyId } = await register(userId, authenticator);
    const otherAuthenticator = new SoftAuthenticator(origin);
    const { credential: othersCredential } = await register(otherId, otherAuthenticator);

    const created = await rest("POST", SESSIONS, {
      json: {
        checks: { user: { user_id: userId } },
        challenges: { webauthn: { user_verification: "USER_VERIFICATION_REQUIREMENT_REQUIRED" } },
      },
    });
    assert.equal(created.status, 201, created.text);
    const sessionId = created.json.details.id;
    const token = created.json.session_token;
    let options = created.json.challenges.webauthn.public_key_credential_request_options;
    assert.equal(options.rpId, "localhost");
    assert.equal(options.userVerification, "required");
    assert.deepEqual(
      options.allowCredentials.map((c: Json) => c.id),
      [credential.id.toString("base64url")],
    );

    const patch = (checks: unknown, challenges?: unknown) =>
      rest("PATCH", `${SESSIONS}/${sessionId}`, { json: { session_token: token, checks, challenges } });
    const newChallenge = async () => {
      const reply = await patch(undefined, {
        webauthn: { user_verification: "USER_VERIFICATION_REQUIREMENT_REQUIRED" },
      });
      assert.equal(reply.status, 200, reply.text);
      options = reply.json.challenges.webauthn.public_key_credential_request_options;
    };

    // Each wrong assertion: 400, a counted failure, no check passed, the key's counter unchanged.
    const refusals: Array<[string, () => Record<string, unknown>, RegExp]> = [
      [
        "another origin",
        () => authenticator.assert(credential, options, { origin: "https://evil.example" }),
        /origin/i,
      ],
      ["another RP ID", () => authenticator.assert(credential, options, { rpId: "evil.example" }), /RP ID/i],
      [
        "another challenge",
        () =>
          authenticator.assert(credential, options, { challenge: Buffer.from("x").toString("base64url") }),
        /challenge/i,
      ],
      [
        "a wrong signature",
        () => authenticator.assert(credential, options, { signature: "wrong" }),
        /signature/i,
      ],
      [
        "no user verification",
        () => authenticator.assert(credential, options, { flags: Flags.UP }),
        /verif/i,
      ],
      [
        "another user's credential",
        () => otherAuthenticator.assert(othersCredential, options),
        /not a passkey of the user/,
      ],
      [
        "another user's handle",
        () =>
          authenticator.assert(credential, options, {
            userHandle: Buffer.from(otherId).toString("base64url"),
          }),
        /not a passkey of the user/,
      ],
    ];
    let failures = 0;
    for (const [what, make, message] of refusals) {
      if (failures === 4) {
        await newChallenge(); // five wrong answers would remove the challenge
        failures = 0;
      }
      const counter = credential.counter;
      const reply = await patch({ webauthn: { credential_assertion_data: make() } });
      assertRpcError(reply, 400, 3, message);
      failures++;
      credential.counter = counter;
      assert.equal(await userEvents(userId, UserEvent.passkeyUsed), 0, `${what}: not used`);
    }
    assert.equal(await userEvents(userId, UserEvent.factorCheckFailed), refusals.length);
    let session = await rest("GET", `${SESSIONS}/${sessionId}`);
    assert.equal(session.json.session.session.factors.webauthn, undefined);

    // The right assertion passes: the factor with user verification, the key's counter kept.
    const passed = await patch({
      webauthn: { credential_assertion_data: authenticator.assert(credential, options) },
    });
    assert.equal(passed.status, 200, passed.text);
    session = await rest("GET", `${SESSIONS}/${sessionId}`);
    assert.equal(session.json.session.session.factors.webauthn.user_verified, true);
    assert.ok(session.json.session.session.factors.webauthn.verified_at);
    const rows = await platform.db.query<{ data: Json; last_used_at: Date | null }>(
      "SELECT data, last_used_at FROM user_factors WHERE user_id = $1 AND id = $2",
      [userId, passkeyId],
    );
    const data = typeof rows[0].data === "string" ? JSON.parse(rows[0].data) : rows[0].data;
    assert.equal(data.counter, credential.counter);
    assert.ok(rows[0].last_used_at);
    const amr = await platform.db.query<{ webauthn_amr: string }>(
      "SELECT webauthn_amr FROM sessions WHERE id = $1",
      [sessionId],
    );
    assert.equal(amr[0].webauthn_amr, "hwk");

    // The challenge was used up: the same assertion again is FAILED_PRECONDITION.
    const replay = await patch({
      webauthn: { credential_assertion_data: authenticator.assert(credential, options) },
    });
    assertRpcError(replay, 400, 9, /no open webauthn challenge/);

    // A counter that goes back is refused (a cloned key), over Connect too.
    await newChallenge();
    const stale = credential.counter - 1;
    await assert.rejects(
      grpcCall(platform, owner, PlatformSessions, "PatchSession", {
        id: sessionId,
        session: {
          session_token: token,
          checks: {
            webauthn: {
              credential_assertion_data: authenticator.assert(credential, options, { counter: stale }),
            },
          },
        },
      }),
      /counter/i,
    );
    credential.counter = stale + 1;
    // Over Connect, the right one passes.
    const ok = await grpcCall(platform, owner, PlatformSessions, "PatchSession", {
      id: sessionId,
      session: {
        session_token: token,
        checks: { webauthn: { credential_assertion_data: authenticator.assert(credential, options) } },
      },
    });
    assert.ok(ok.details.id);
    assert.equal(await userEvents(userId, UserEvent.passkeyUsed), 2);

    // A challenge for a domain that is not the instance's: 400.
    const foreign = await patch(undefined, { webauthn: { domain: "evil.example" } });
    assertRpcError(foreign, 400, 3, /webauthn\.domain/);
  });
});
