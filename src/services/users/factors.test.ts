/**
 * A user's second factors through the users API (REST and Connect): TOTP registration and activation,
 * one-time codes by e-mail and SMS, recovery codes, the list of authentication methods; who may manage
 * them, and that a refused call stores nothing.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { generate } from "otplib";
import {
  addMachineUser,
  assertRejected,
  expectNothingStored,
  type Json,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { USER } from "../../domain/user/events.ts";
import { AuthenticationMethodType } from "../../gen/platform/resources/user/v3alpha/factors_pb.ts";
import { PlatformUsers } from "../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import { newId } from "../../id.ts";
import { addCallers } from "../actions/testing.ts";

const USERS = "/resources/v3alpha/users";
/** A TOTP code of `secret` for the time `offsetSteps` steps of 30 s from now. */
export const totpCode = (secret: string, offsetSteps = 0) =>
  generate({ secret, epoch: Math.floor(Date.now() / 1000) + offsetSteps * 30 });

describe("users: second factors", () => {
  let platform: TestPlatform;
  let callers: Awaited<ReturnType<typeof addCallers>>;
  const rest = restClient(
    () => platform,
    () => callers.orgOwner,
  );
  const as = (token: () => string) => restClient(() => platform, token);

  before(async () => {
    platform = await startPlatform({ listen: true });
    callers = await addCallers(platform);
  });
  after(() => platform.stop());

  let seq = 0;
  const createHuman = async (human: Record<string, unknown> = {}) => {
    const username = `factor-${++seq}`;
    const r = await rest("POST", USERS, {
      json: {
        username,
        human: {
          profile: { given_name: "Ada", family_name: "Lovelace" },
          email: { address: `${username}@example.com`, is_verified: true },
          password: { password: "Correct-Horse-1!", change_required: false },
          ...human,
        },
      },
    });
    assert.equal(r.status, 201, r.text);
    return { id: r.json.details.id as string, username };
  };
  const methods = async (id: string) =>
    (await rest("GET", `${USERS}/${id}/authentication_methods`)).json.types as string[];
  const eventsOf = async (id: string, type: string) =>
    platform.db.query<{ payload: Json }>(
      "SELECT payload FROM events WHERE aggregate_type = $1 AND aggregate_id = $2 AND event_type = $3 ORDER BY sequence",
      [USER, id, type],
    );

  it("TOTP: registered pending (the secret answered once, sealed in the event), replaced while pending, activated by a right code, then 409 until removed", async () => {
    const { id, username } = await createHuman();
    const first = await rest("POST", `${USERS}/${id}/totp`);
    assert.equal(first.status, 200, first.text);
    const uri = new URL(first.json.uri);
    assert.equal(uri.protocol, "otpauth:");
    assert.equal(uri.host, "totp");
    assert.equal(uri.searchParams.get("secret"), first.json.secret);
    assert.ok(
      decodeURIComponent(uri.pathname).endsWith(`:${username}`) || uri.pathname.includes(username),
      uri.href,
    );
    assert.ok(uri.searchParams.get("issuer"));
    const added = await eventsOf(id, "user.totp.added");
    assert.equal(added.length, 1);
    assert.ok(!JSON.stringify(added[0].payload).includes(first.json.secret), "the secret is sealed");
    assert.deepEqual(await methods(id), ["AUTHENTICATION_METHOD_TYPE_PASSWORD"], "pending is not listed");

    const second = await rest("POST", `${USERS}/${id}/totp`);
    assert.equal(second.status, 200, second.text);
    assert.notEqual(second.json.secret, first.json.secret, "a new registration replaces the pending one");
    const secret = second.json.secret as string;

    await assertRejected(
      platform,
      () => rest("POST", `${USERS}/${id}/totp/_verify`, { json: { code: "" } }),
      400,
      3,
      "code",
    );
    // the replaced secret's code is wrong now
    await assertRejected(
      platform,
      async () =>
        rest("POST", `${USERS}/${id}/totp/_verify`, { json: { code: await totpCode(first.json.secret) } }),
      400,
      3,
      "code",
    );
    const code = await totpCode(secret);
    const verified = await rest("POST", `${USERS}/${id}/totp/_verify`, { json: { code } });
    assert.equal(verified.status, 200, verified.text);
    assert.deepEqual(await methods(id), [
      "AUTHENTICATION_METHOD_TYPE_PASSWORD",
      "AUTHENTICATION_METHOD_TYPE_TOTP",
    ]);
    assert.equal((await eventsOf(id, "user.totp.used")).length, 1, "the code's step is used up");

    await assertRejected(platform, () => rest("POST", `${USERS}/${id}/totp`), 409, 6, /active TOTP/);
    await assertRejected(
      platform,
      () => rest("POST", `${USERS}/${id}/totp/_verify`, { json: { code } }),
      409,
      6,
    );
    assert.equal((await rest("DELETE", `${USERS}/${id}/totp`)).status, 200);
    assert.deepEqual(await methods(id), ["AUTHENTICATION_METHOD_TYPE_PASSWORD"]);
    await assertRejected(platform, () => rest("DELETE", `${USERS}/${id}/totp`), 404, 5);
    await assertRejected(
      platform,
      () => rest("POST", `${USERS}/${id}/totp/_verify`, { json: { code } }),
      404,
      5,
      /no TOTP registration/,
    );
    assert.equal((await rest("POST", `${USERS}/${id}/totp`)).status, 200, "registered again once removed");
  });

  it("e-mail and SMS codes need a verified address or number; 409 when enabled, 404 when not", async () => {
    const unverified = await createHuman({ email: { address: "unverified@example.com" } });
    await assertRejected(
      platform,
      () => rest("POST", `${USERS}/${unverified.id}/otp_email`),
      400,
      9,
      /verified e-mail address/,
    );
    await assertRejected(
      platform,
      () => rest("POST", `${USERS}/${unverified.id}/otp_sms`),
      400,
      9,
      /verified phone number/,
    );
    const unverifiedPhone = await createHuman({ phone: { number: "+41 44 555 00 01" } });
    await assertRejected(platform, () => rest("POST", `${USERS}/${unverifiedPhone.id}/otp_sms`), 400, 9);

    const { id } = await createHuman({ phone: { number: "+41 44 555 00 02", is_verified: true } });
    for (const channel of ["otp_email", "otp_sms"]) {
      await assertRejected(platform, () => rest("DELETE", `${USERS}/${id}/${channel}`), 404, 5);
      const added = await rest("POST", `${USERS}/${id}/${channel}`);
      assert.equal(added.status, 200, added.text);
      await assertRejected(platform, () => rest("POST", `${USERS}/${id}/${channel}`), 409, 6);
    }
    assert.deepEqual(await methods(id), [
      "AUTHENTICATION_METHOD_TYPE_PASSWORD",
      "AUTHENTICATION_METHOD_TYPE_OTP_SMS",
      "AUTHENTICATION_METHOD_TYPE_OTP_EMAIL",
    ]);
    assert.equal((await rest("DELETE", `${USERS}/${id}/otp_email`)).status, 200);
    assert.deepEqual(await methods(id), [
      "AUTHENTICATION_METHOD_TYPE_PASSWORD",
      "AUTHENTICATION_METHOD_TYPE_OTP_SMS",
    ]);
  });

  it("recovery codes: 10 distinct codes answered once, stored hashed, replaced by new ones, removed", async () => {
    const { id } = await createHuman();
    await assertRejected(platform, () => rest("DELETE", `${USERS}/${id}/recovery_codes`), 404, 5);
    const made = await rest("POST", `${USERS}/${id}/recovery_codes`);
    assert.equal(made.status, 200, made.text);
    const codes = made.json.codes as string[];
    assert.equal(codes.length, 10);
    assert.equal(new Set(codes).size, 10);
    for (const code of codes) assert.match(code, /^[A-Z2-9]{5}-[A-Z2-9]{5}$/);
    const [event] = await eventsOf(id, "user.recovery_codes.generated");
    for (const code of codes) assert.ok(!JSON.stringify(event.payload).includes(code.slice(0, 5)), "hashed");
    assert.ok((await methods(id)).includes("AUTHENTICATION_METHOD_TYPE_RECOVERY_CODE"));
    const again = await rest("POST", `${USERS}/${id}/recovery_codes`);
    assert.equal(again.status, 200);
    assert.equal((again.json.codes as string[]).filter((c) => codes.includes(c)).length, 0);
    assert.equal((await rest("DELETE", `${USERS}/${id}/recovery_codes`)).status, 200);
    assert.ok(!(await methods(id)).includes("AUTHENTICATION_METHOD_TYPE_RECOVERY_CODE"));
  });

  it("refuses unknown users, machines, and callers without user.write (404 without user.read); nothing stored", async () => {
    const { id } = await createHuman();
    const machine = await addMachineUser(platform, { username: `factor-machine-${++seq}` });
    const unknown = newId();
    for (const [method, path] of [
      ["POST", "totp"],
      ["DELETE", "totp"],
      ["POST", "otp_email"],
      ["POST", "otp_sms"],
      ["DELETE", "otp_email"],
      ["POST", "recovery_codes"],
      ["DELETE", "recovery_codes"],
    ] as const) {
      await assertRejected(
        platform,
        () => rest(method, `${USERS}/${unknown}/${path}`),
        404,
        5,
        "user not found",
      );
      await assertRejected(
        platform,
        () => as(() => callers.nobody)(method, `${USERS}/${id}/${path}`),
        404,
        5,
        "user not found",
      );
      await assertRejected(
        platform,
        () => as(() => callers.viewer)(method, `${USERS}/${id}/${path}`),
        403,
        7,
      );
    }
    await assertRejected(
      platform,
      () => rest("POST", `${USERS}/${machine.userId}/totp`),
      400,
      9,
      /human users/,
    );
    await assertRejected(
      platform,
      () => rest("POST", `${USERS}/${unknown}/totp/_verify`, { json: { code: "123456" } }),
      404,
      5,
    );
    const nobodyList = await as(() => callers.nobody)("GET", `${USERS}/${id}/authentication_methods`);
    assert.equal(nobodyList.status, 404, nobodyList.text);
    const viewerList = await as(() => callers.viewer)("GET", `${USERS}/${id}/authentication_methods`);
    assert.equal(viewerList.status, 200, "user.read lists the methods");
  });

  it("Connect: register, verify, list, generate recovery codes; a wrong code is INVALID_ARGUMENT", async () => {
    const { id } = await createHuman();
    const users = createClient(
      PlatformUsers,
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
    );
    const headers = { authorization: `Bearer ${callers.orgOwner}` };
    const registered = await users.registerTOTP({ id }, { headers });
    assert.ok(registered.details?.sequence);
    const wrongCode = (await totpCode(registered.secret)) === "000000" ? "111111" : "000000";
    const failed = await expectNothingStored(platform, () =>
      users.verifyTOTPRegistration({ id, code: wrongCode }, { headers }).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      ),
    );
    assert.equal(failed?.code, Code.InvalidArgument);
    await users.verifyTOTPRegistration({ id, code: await totpCode(registered.secret) }, { headers });
    const codes = await users.generateRecoveryCodes({ id }, { headers });
    assert.equal(codes.codes.length, 10);
    await users.addOTPEmail({ id }, { headers });
    const listed = await users.listAuthenticationMethodTypes({ id }, { headers });
    assert.deepEqual(listed.types, [
      AuthenticationMethodType.PASSWORD,
      AuthenticationMethodType.TOTP,
      AuthenticationMethodType.OTP_EMAIL,
      AuthenticationMethodType.RECOVERY_CODE,
    ]);
    await users.removeOTPEmail({ id }, { headers });
    await users.removeRecoveryCodes({ id }, { headers });
    await users.removeTOTP({ id }, { headers });
    assert.deepEqual((await users.listAuthenticationMethodTypes({ id }, { headers })).types, [
      AuthenticationMethodType.PASSWORD,
    ]);
  });
});
