import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { authorizePath, responseParams, signInThroughUi } from "../../../test/authorize.ts";
import { assertRejected, restClient, startPlatform, type TestPlatform } from "../../../test/helpers.ts";
import { HttpBrowser } from "../../../test/login.ts";
import { client, discover } from "../../../test/oidc.ts";
import { type SmtpReceiver, startSmtpReceiver } from "../../../test/smtp-receiver.ts";
import { testTime } from "../../../test/time.ts";
import { codeHash } from "../../domain/user/codes.ts";
import { USER, UserEvent } from "../../domain/user/events.ts";
import { PlatformUsers } from "../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import { addCallers } from "../actions/testing.ts";

const USERS = "/resources/v3alpha/users";
const SEARCH = "/resources/v3alpha/notifications/_search";
const CALLBACK = "https://self.example/callback";
const API_SCOPE = "openid urn:platform:iam:org:project:id:platform:aud";

/** E-mail and phone verification codes: sent through the outbox, single use, 5 tries, expiry, rate limit. */
describe("users: verification codes", () => {
  let platform: TestPlatform;
  let callers: Awaited<ReturnType<typeof addCallers>>;
  let smtp: SmtpReceiver;
  let gateway: http.Server;
  const sms: Record<string, unknown>[] = [];
  const rest = restClient(
    () => platform,
    () => callers.owner,
  );

  before(async () => {
    smtp = await startSmtpReceiver({});
    gateway = http.createServer((req, res) => {
      let raw = "";
      req.on("data", (d) => (raw += d));
      req.on("end", () => {
        sms.push(JSON.parse(raw));
        res.writeHead(202).end();
      });
    });
    await new Promise<void>((r) => gateway.listen(0, "127.0.0.1", r));
    platform = await startPlatform({ listen: true });
    callers = await addCallers(platform);
    for (const [path, body] of [
      [
        "/resources/v3alpha/smtp_providers",
        { description: "mail", sender_address: "noreply@example.com", host: `127.0.0.1:${smtp.port}` },
      ],
      [
        "/resources/v3alpha/sms_providers",
        {
          description: "sms",
          http: { endpoint: `http://127.0.0.1:${(gateway.address() as AddressInfo).port}/send` },
        },
      ],
    ] as const) {
      const created = await rest("POST", path, { json: body });
      assert.equal(created.status, 201, created.text);
      assert.equal((await rest("POST", `${path}/${created.json.details.id}/_activate`)).status, 200);
    }
  });
  after(async () => {
    await platform.stop();
    await smtp.close();
    await new Promise((r) => gateway.close(r));
  });

  const createHuman = async (username: string, extra: Record<string, unknown> = {}) => {
    const r = await rest("POST", USERS, {
      json: {
        username,
        human: {
          profile: { given_name: "Ada", family_name: "Lovelace", preferred_language: "fr" },
          email: { address: `${username}@example.com` },
          ...extra,
        },
      },
    });
    assert.equal(r.status, 201, r.text);
    return r.json.details.id as string;
  };
  const user = async (id: string) => (await rest("GET", `${USERS}/${id}`)).json.user;
  const sendCode = (id: string, returnCode = false, channel = "email") =>
    rest("POST", `${USERS}/${id}/${channel}/_send_code`, { json: returnCode ? { return_code: true } : {} });
  const verify = (id: string, code: string, channel = "email") =>
    rest("POST", `${USERS}/${id}/${channel}/_verify`, { json: { verification_code: code } });
  const waitFor = async <T>(find: () => T | undefined, what: string): Promise<T> => {
    for (let i = 0; i < testTime(200); i++) {
      const found = find();
      if (found !== undefined) return found;
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.fail(`no ${what}`);
  };
  const messagesOf = async (id: string) =>
    ((await rest("POST", SEARCH, { json: [{ user_id: { user_id: id } }] })).json.result ?? []) as unknown[];

  it("_send_code e-mails VERIFY_EMAIL in the user's language; the code verifies once", async () => {
    const id = await createHuman("ada");
    assert.equal((await user(id)).human.email.is_verified, false);
    const sent = await sendCode(id);
    assert.equal(sent.status, 200, sent.text);
    assert.equal(sent.json.verification_code, undefined, "the code is never answered without return_code");
    const mail = await waitFor(
      () => smtp.received.find((m) => m.envelope.to.includes("ada@example.com")),
      "verification e-mail",
    );
    const link = /https?:\/\/\S+\/ui\/login\/verify-email\?\S+/.exec(mail.mail.text ?? "")?.[0];
    assert.ok(link, mail.mail.text ?? "");
    const url = new URL(link);
    assert.deepEqual(
      [...url.searchParams.keys()].sort(),
      ["code", "userID"],
      "the link carries the code only",
    );
    assert.equal(url.searchParams.get("userID"), id);
    const code = url.searchParams.get("code")!;
    assert.match(code, /^[A-Z2-9]{8}$/);
    assert.match(mail.mail.subject ?? "", /^Confirmez votre adresse e-mail/, "French subject");

    await assertRejected(platform, () => verify(id, "", "email"), 400, 3, "verification_code");
    const wrong = await verify(id, code === "AAAAAAAA" ? "BBBBBBBB" : "AAAAAAAA");
    assert.equal(wrong.status, 400, wrong.text);
    assert.equal(wrong.json.code, 3);
    assert.equal((await user(id)).human.email.is_verified, false, "a wrong code changes nothing");

    const right = await verify(id, code);
    assert.equal(right.status, 200, right.text);
    assert.equal((await user(id)).human.email.is_verified, true);
    assert.equal((await verify(id, code)).status, 400, "single use");
  });

  it("return_code answers the code and sends nothing", async () => {
    const id = await createHuman("returned");
    const sent = await sendCode(id, true);
    assert.equal(sent.status, 200, sent.text);
    const code = sent.json.verification_code as string;
    assert.match(code, /^[A-Z2-9]{8}$/);
    assert.deepEqual(await messagesOf(id), [], "nothing queued");
    assert.equal((await verify(id, code)).status, 200);
  });

  it("five wrong tries invalidate the code; a code of one user never verifies another", async () => {
    const id = await createHuman("tries");
    const code = (await sendCode(id, true)).json.verification_code as string;
    for (let i = 0; i < 5; i++) assert.equal((await verify(id, `WRONG${i}XX`)).status, 400);
    assert.equal((await verify(id, code)).status, 400, "invalidated");
    assert.equal((await user(id)).human.email.is_verified, false);

    const other = await createHuman("other");
    const mine = await createHuman("mine");
    const otherCode = (await sendCode(other, true)).json.verification_code as string;
    await sendCode(mine, true);
    assert.equal((await verify(mine, otherCode)).status, 400);
    assert.equal((await user(mine)).human.email.is_verified, false);
    assert.equal((await verify(other, otherCode)).status, 200);
  });

  it("an expired code is refused", async () => {
    const id = await createHuman("expired");
    const instanceId = platform.bootstrapResult!.instanceId;
    const orgId = platform.bootstrapResult!.orgId;
    const code = "EXP1RED2";
    const target = "expired@example.com";
    await platform.eventStore.push({ instanceId, creator: "test" }, async () => [
      {
        aggregateType: USER,
        aggregateId: id,
        resourceOwner: orgId,
        type: UserEvent.emailCodeAdded,
        payload: {
          code_hash: codeHash(
            platform.deps.masterKey,
            { instanceId, userId: id, channel: "email", target },
            code,
          ),
          expires_at: new Date(Date.now() - 1000).toISOString(),
          target,
          sent: false,
        },
      },
    ]);
    assert.equal((await verify(id, code)).status, 400);
    assert.equal((await user(id)).human.email.is_verified, false);
  });

  it("at most 3 codes a minute for a user: 429 beyond", async () => {
    const id = await createHuman("many");
    for (let i = 0; i < 3; i++) assert.equal((await sendCode(id, true)).status, 200);
    const refused = await sendCode(id, true);
    assert.equal(refused.status, 429, refused.text);
    assert.equal(refused.json.code, 8);
  });

  it("the phone: VERIFY_PHONE by SMS with a 6-digit code; no phone is FAILED_PRECONDITION", async () => {
    const id = await createHuman("phoned", { phone: { number: "+41791234567" } });
    assert.equal((await sendCode(id, false, "phone")).status, 200);
    const message = await waitFor(() => sms.find((m) => m.user_id === id), "SMS");
    assert.equal(message.message_type, "VERIFY_PHONE");
    const code = /\b(\d{6})\b/.exec(String(message.text))?.[1];
    assert.ok(code, String(message.text));
    assert.equal((await verify(id, code, "phone")).status, 200);
    assert.equal((await user(id)).human.phone.is_verified, true);

    const without = await createHuman("no-phone");
    await assertRejected(
      platform,
      () => sendCode(without, false, "phone"),
      400,
      9,
      "the user has no phone number",
    );
  });

  it("a changed address without is_verified: true is unverified and gets a code; with it, none", async () => {
    const id = await createHuman("mover", { email: { address: "mover@example.com", is_verified: true } });
    const patched = await rest("PATCH", `${USERS}/${id}`, {
      json: { human: { email: { address: "moved@example.com" } } },
    });
    assert.equal(patched.status, 200, patched.text);
    assert.equal((await user(id)).human.email.is_verified, false);
    const mail = await waitFor(
      () => smtp.received.find((m) => m.envelope.to.includes("moved@example.com")),
      "code to the new address",
    );
    const code = /[?&]code=([A-Z2-9]{8})/.exec(mail.mail.text ?? "")?.[1];
    assert.ok(code, mail.mail.text ?? "");
    assert.equal((await verify(id, code)).status, 200);
    assert.equal((await user(id)).human.email.is_verified, true);

    const before = (await messagesOf(id)).length;
    const verified = await rest("PATCH", `${USERS}/${id}`, {
      json: { human: { email: { address: "trusted@example.com", is_verified: true } } },
    });
    assert.equal(verified.status, 200, verified.text);
    assert.equal((await user(id)).human.email.is_verified, true);
    const after = (await messagesOf(id)) as { type: string; recipient: string }[];
    assert.equal(after.length, before + 1, "no code for a verified address, only the notice");
    assert.ok(
      after.some((m) => m.type === "EMAIL_CHANGED" && m.recipient === "moved@example.com"),
      "the previous address is told",
    );
  });

  it("a code also for an address replacing an unverified one, and for a first phone number", async () => {
    const id = await createHuman("drifter", { email: { address: "drifter@example.com" } });
    assert.equal((await user(id)).human.email.is_verified ?? false, false);
    const patched = await rest("PATCH", `${USERS}/${id}`, {
      json: { human: { email: { address: "drifted@example.com" }, phone: { number: "+41 79 765 43 21" } } },
    });
    assert.equal(patched.status, 200, patched.text);
    await waitFor(
      () => smtp.received.find((m) => m.envelope.to.includes("drifted@example.com")),
      "code to the new address",
    );
    const message = await waitFor(() => sms.find((m) => m.user_id === id), "code to the first phone number");
    assert.equal(message.recipient, "+41 79 765 43 21");
    assert.equal(message.message_type, "VERIFY_PHONE");
  });

  /** An access token of the API for `username`, signed in through the login UI (authorization code flow). */
  const signIn = async (username: string, password: string) => {
    const project = await rest("POST", "/resources/v3alpha/projects", { json: { name: `self ${username}` } });
    assert.equal(project.status, 201, project.text);
    const app = await rest("POST", `/resources/v3alpha/projects/${project.json.details.id}/apps`, {
      json: {
        name: "self",
        oidc: {
          redirect_uris: [CALLBACK],
          response_types: ["OIDC_RESPONSE_TYPE_CODE"],
          grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE"],
          app_type: "OIDC_APP_TYPE_WEB",
          auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
        },
      },
    });
    assert.equal(app.status, 201, app.text);
    const config = await discover(
      platform.url,
      app.json.client_id,
      client.ClientSecretBasic(app.json.client_secret),
    );
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const path = authorizePath({
      client_id: app.json.client_id,
      redirect_uri: CALLBACK,
      response_type: "code",
      scope: API_SCOPE,
      state,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
    });
    const answer = await signInThroughUi(new HttpBrowser(platform.url), path, username, password);
    const tokens = await client.authorizationCodeGrant(config, responseParams(answer).url, {
      pkceCodeVerifier: verifier,
      expectedState: state,
    });
    return tokens.access_token;
  };

  it("a user without any role may send and verify its own code, not another's", async () => {
    const id = await createHuman("self-served", { password: { password: "Self-Pa55word!" } });
    const token = await signIn("self-served", "Self-Pa55word!");
    const asSelf = restClient(platform, () => token);
    const sent = await asSelf("POST", `${USERS}/${id}/email/_send_code`, { json: { return_code: true } });
    assert.equal(sent.status, 200, sent.text);
    const verified = await asSelf("POST", `${USERS}/${id}/email/_verify`, {
      json: { verification_code: sent.json.verification_code },
    });
    assert.equal(verified.status, 200, verified.text);
    const other = await createHuman("someone-else");
    const refused = await asSelf("POST", `${USERS}/${other}/email/_send_code`, {
      json: { return_code: true },
    });
    assert.ok(refused.status === 403 || refused.status === 404, refused.text);
  });

  it("permissions and Connect", async () => {
    const id = await createHuman("connected");
    const asNobody = restClient(platform, () => callers.nobody);
    const denied = await asNobody("POST", `${USERS}/${id}/email/_send_code`, { json: {} });
    assert.ok(denied.status === 403 || denied.status === 404, denied.text);
    const client = createClient(
      PlatformUsers,
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
    );
    const headers = { authorization: `Bearer ${callers.owner}` };
    const sent = await client.sendEmailCode({ id, returnCode: true }, { headers });
    assert.ok(sent.verificationCode);
    const failed = await client.verifyEmail({ id, verificationCode: "NOPE2345" }, { headers }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    assert.equal(failed?.code, Code.InvalidArgument);
    await client.verifyEmail({ id, verificationCode: sent.verificationCode }, { headers });
    assert.equal((await user(id)).human.email.is_verified, true);
  });
});
