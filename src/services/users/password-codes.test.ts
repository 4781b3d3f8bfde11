import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { assertRejected, restClient, startPlatform, type TestPlatform } from "../../../test/helpers.ts";
import { type SmtpReceiver, startSmtpReceiver } from "../../../test/smtp-receiver.ts";
import { testTime } from "../../../test/time.ts";
import { UserEvent } from "../../domain/user/events.ts";
import { PlatformUsers } from "../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import { addCallers } from "../actions/testing.ts";

const USERS = "/resources/v3alpha/users";
const PASSWORD = "Secret-Pa55word!";

/** Password codes: a reset and an invitation by e-mail, used by _set_password in place of the current password. */
describe("users: password reset and invitation", () => {
  let platform: TestPlatform;
  let callers: Awaited<ReturnType<typeof addCallers>>;
  let smtp: SmtpReceiver;
  const rest = restClient(
    () => platform,
    () => callers.owner,
  );

  before(async () => {
    smtp = await startSmtpReceiver({});
    platform = await startPlatform({ listen: true });
    callers = await addCallers(platform);
    const created = await rest("POST", "/resources/v3alpha/smtp_providers", {
      json: { description: "mail", sender_address: "noreply@example.com", host: `127.0.0.1:${smtp.port}` },
    });
    assert.equal(created.status, 201, created.text);
    const activated = await rest(
      "POST",
      `/resources/v3alpha/smtp_providers/${created.json.details.id}/_activate`,
    );
    assert.equal(activated.status, 200);
  });
  after(async () => {
    await platform.stop();
    await smtp.close();
  });

  const createHuman = async (username: string, password?: string, emailVerified = true) => {
    const r = await rest("POST", USERS, {
      json: {
        username,
        human: {
          profile: { given_name: "Grace", family_name: "Hopper", preferred_language: "de" },
          email: { address: `${username}@example.com`, is_verified: emailVerified },
          ...(password ? { password: { password } } : {}),
        },
      },
    });
    assert.equal(r.status, 201, r.text);
    return r.json.details.id as string;
  };
  const passwordHash = async (id: string) =>
    (
      await platform.db.query<{ password_hash: string | null }>(
        "SELECT password_hash FROM users WHERE id = $1",
        [id],
      )
    )[0].password_hash;
  const emailVerified = async (id: string) =>
    (await rest("GET", `${USERS}/${id}`)).json.user.human.email.is_verified as boolean;
  const eventCount = async (id: string, type: string) =>
    (
      await platform.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM events WHERE aggregate_id = $1 AND event_type = $2",
        [id, type],
      )
    )[0].n;
  const setWithCode = (id: string, code: string, password = "N3w-Pa55word!") =>
    rest("POST", `${USERS}/${id}/_set_password`, { json: { password, verification_code: code } });
  const mailTo = async (address: string, path: string) => {
    for (let i = 0; i < testTime(200); i++) {
      const mail = smtp.received.find(
        (m) => m.envelope.to.includes(address) && (m.mail.text ?? "").includes(path),
      );
      if (mail) return mail;
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.fail(`no message to ${address} with ${path}`);
  };

  it("_request_reset e-mails PASSWORD_RESET with a link carrying the code; _set_password takes the code once", async () => {
    const id = await createHuman("grace", PASSWORD);
    const before = await passwordHash(id);
    const requested = await rest("POST", `${USERS}/${id}/password/_request_reset`, { json: {} });
    assert.equal(requested.status, 200, requested.text);
    assert.equal(requested.json.verification_code, undefined);
    const mail = await mailTo("grace@example.com", "/ui/login/password-reset?");
    assert.match(mail.mail.subject ?? "", /Passwort/, "in the user's language");
    const url = new URL(/https?:\/\/\S+\/ui\/login\/password-reset\?\S+/.exec(mail.mail.text ?? "")![0]);
    assert.deepEqual([...url.searchParams.keys()].sort(), ["code", "userID"]);
    const code = url.searchParams.get("code")!;

    const wrong = await setWithCode(id, "WRONG234");
    assert.equal(wrong.status, 400, wrong.text);
    assert.equal(await passwordHash(id), before, "a wrong code changes nothing");
    await assertRejected(
      platform,
      () =>
        rest("POST", `${USERS}/${id}/_set_password`, {
          json: { password: "N3w-Pa55word!", verification_code: code, current_password: PASSWORD },
        }),
      400,
      3,
    );

    assert.equal((await setWithCode(id, code)).status, 200);
    assert.notEqual(await passwordHash(id), before);
    assert.equal((await setWithCode(id, code, "Th1rd-Pa55word!")).status, 400, "single use");
    await mailTo("grace@example.com", "/ui/login/loginname"); // PASSWORD_CHANGED
  });

  it("return_code answers the code and sends nothing; five wrong tries invalidate it", async () => {
    const id = await createHuman("quiet", PASSWORD);
    const sent = smtp.received.length;
    const requested = await rest("POST", `${USERS}/${id}/password/_request_reset`, {
      json: { return_code: true },
    });
    assert.equal(requested.status, 200, requested.text);
    const code = requested.json.verification_code as string;
    assert.match(code, /^[A-Z2-9]{8}$/);
    for (let i = 0; i < 5; i++) assert.equal((await setWithCode(id, `BAD${i}CODE`)).status, 400);
    assert.equal((await setWithCode(id, code)).status, 400, "invalidated");
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(smtp.received.length, sent, "nothing was sent");
  });

  it("a user without a preferred language gets the default language of the language settings", async () => {
    const set = await rest("PATCH", "/settings/v3alpha/languages", {
      json: { default_language: { key: "it" } },
    });
    assert.equal(set.status, 200, set.text);
    try {
      const r = await rest("POST", USERS, {
        json: {
          username: "italian",
          human: {
            profile: { given_name: "Ada", family_name: "Byron" },
            email: { address: "italian@example.com", is_verified: true },
          },
        },
      });
      assert.equal(r.status, 201, r.text);
      assert.equal(
        (await rest("POST", `${USERS}/${r.json.details.id}/password/_request_reset`, { json: {} })).status,
        200,
      );
      const mail = await mailTo("italian@example.com", "/ui/login/password-reset?");
      assert.match(mail.mail.subject ?? "", /^Reimposta la tua password/);
    } finally {
      await rest("PATCH", "/settings/v3alpha/languages", { json: { default_language: {} } });
    }
  });

  it("_invite sends INIT to a user without a password; the code sets the first password", async () => {
    const id = await createHuman("newcomer");
    const invited = await rest("POST", `${USERS}/${id}/_invite`, { json: {} });
    assert.equal(invited.status, 200, invited.text);
    const mail = await mailTo("newcomer@example.com", "/ui/login/invite?");
    const code = new URL(
      /https?:\/\/\S+\/ui\/login\/invite\?\S+/.exec(mail.mail.text ?? "")![0],
    ).searchParams.get("code")!;
    assert.equal(await passwordHash(id), null);
    assert.equal((await setWithCode(id, code)).status, 200);
    assert.ok(await passwordHash(id));

    const [event] = await platform.db.query<{ payload: Record<string, unknown> }>(
      "SELECT payload FROM events WHERE aggregate_id = $1 AND event_type = $2",
      [id, UserEvent.passwordCodeAdded],
    );
    assert.equal(event.payload.reason, "invite");
    assert.ok(!JSON.stringify(event.payload).includes(code), "never the code in an event");

    await assertRejected(
      platform,
      () => rest("POST", `${USERS}/${id}/_invite`, { json: {} }),
      400,
      9,
      "the user has a password",
    );
  });

  it("_set_password takes either kind of code: an invitation's verifies the e-mail address, a reset's does not", async () => {
    const invited = await createHuman("unverified-invitee", undefined, false);
    const invite = await rest("POST", `${USERS}/${invited}/_invite`, { json: { return_code: true } });
    assert.equal(invite.status, 200, invite.text);
    assert.equal(await emailVerified(invited), false);
    assert.equal((await setWithCode(invited, invite.json.verification_code)).status, 200);
    assert.ok(await passwordHash(invited));
    assert.equal(await emailVerified(invited), true, "the invitation reached the address");
    assert.equal(await eventCount(invited, UserEvent.emailVerified), 1);

    const reset = await createHuman("unverified-reset", PASSWORD, false);
    const requested = await rest("POST", `${USERS}/${reset}/password/_request_reset`, {
      json: { return_code: true },
    });
    assert.equal(requested.status, 200, requested.text);
    assert.equal((await setWithCode(reset, requested.json.verification_code)).status, 200);
    assert.equal(await emailVerified(reset), false, "a reset verifies nothing");
    assert.equal(await eventCount(reset, UserEvent.emailVerified), 0);

    // an already verified address gets no second verified event
    const verified = await createHuman("verified-invitee");
    const again = await rest("POST", `${USERS}/${verified}/_invite`, { json: { return_code: true } });
    assert.equal((await setWithCode(verified, again.json.verification_code)).status, 200);
    assert.equal(await eventCount(verified, UserEvent.emailVerified), 0);
  });

  it("a newer password code replaces the open one of the other kind", async () => {
    const id = await createHuman("replaced", undefined, false);
    const invite = await rest("POST", `${USERS}/${id}/_invite`, { json: { return_code: true } });
    const reset = await rest("POST", `${USERS}/${id}/password/_request_reset`, {
      json: { return_code: true },
    });
    assert.equal(reset.status, 200, reset.text);
    const old = await setWithCode(id, invite.json.verification_code);
    assert.equal(old.status, 400, old.text);
    assert.equal(await passwordHash(id), null);
    assert.equal((await setWithCode(id, reset.json.verification_code)).status, 200);
    assert.equal(await emailVerified(id), false, "set with the reset's code: not verified");
  });

  it("Connect: SetPassword with the InviteUser code verifies the e-mail address; a wrong code is INVALID_ARGUMENT", async () => {
    const id = await createHuman("connected", undefined, false);
    const client = createClient(
      PlatformUsers,
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
    );
    const headers = { authorization: `Bearer ${callers.owner}` };
    const invited = await client.inviteUser({ id, returnCode: true }, { headers });
    assert.ok(invited.verificationCode);
    const wrong = await client
      .setPassword({ id, password: { password: "N3w-Pa55word!", verificationCode: "WRONG234" } }, { headers })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    assert.equal(wrong?.code, Code.InvalidArgument);
    assert.equal(await emailVerified(id), false);
    await client.setPassword(
      { id, password: { password: "N3w-Pa55word!", verificationCode: invited.verificationCode } },
      { headers },
    );
    assert.ok(await passwordHash(id));
    assert.equal(await emailVerified(id), true);
  });
});
