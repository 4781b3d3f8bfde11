import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { image, patchBranding, solidPng } from "../../test/branding.ts";
import { addOrg, restClient, startPlatform, type TestPlatform, testTime } from "../../test/helpers.ts";
import { type SmtpReceiver, startSmtpReceiver } from "../../test/smtp-receiver.ts";
import { addCallers } from "../services/actions/testing.ts";

const USERS = "/resources/v3alpha/users";
const SMTP = "/resources/v3alpha/smtp_providers";

/** The HTML e-mails in the colours and with the logo of the recipient's organization, else the instance's. */
describe("branding of the HTML messages", () => {
  let platform: TestPlatform;
  let smtp: SmtpReceiver;
  let callers: Awaited<ReturnType<typeof addCallers>>;
  let orgId: string;
  const rest = restClient(
    () => platform,
    () => callers.owner,
  );

  before(async () => {
    smtp = await startSmtpReceiver({});
    platform = await startPlatform({ listen: true });
    callers = await addCallers(platform);
    orgId = await addOrg(platform, "Acme");
    const provider = await rest("POST", SMTP, {
      json: {
        description: "loopback",
        sender_address: "noreply@example.com",
        host: `127.0.0.1:${smtp.port}`,
      },
    });
    assert.equal(provider.status, 201, provider.text);
    assert.equal((await rest("POST", `${SMTP}/${provider.json.details.id}/_activate`)).status, 200);
  });
  after(async () => {
    await platform.stop();
    await smtp.close();
  });

  /** The HTML of the PASSWORD_CHANGED message to a new user of `org` (query `?ctx.org_id=…` or none). */
  async function mailTo(username: string, query = "") {
    const address = `${username}@example.com`;
    const user = await rest("POST", `${USERS}${query}`, {
      json: {
        username,
        human: {
          profile: { given_name: "Ada", family_name: "Lovelace" },
          email: { address, is_verified: true },
        },
      },
    });
    assert.equal(user.status, 201, user.text);
    const changed = await rest("POST", `${USERS}/${user.json.details.id}/_set_password`, {
      json: { password: "Secret-Pa55word!" },
    });
    assert.equal(changed.status, 200, changed.text);
    const deadline = Date.now() + testTime(20_000);
    for (;;) {
      const mail = smtp.received.find((m) => m.envelope.to.includes(address));
      if (mail) return String(mail.mail.html);
      assert.ok(Date.now() < deadline, `no message to ${address}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  it("uses the organization's colours and logo (an absolute URL on the instance's origin), else the instance's", async () => {
    const unbranded = await mailTo("plain");
    assert.match(unbranded, /#2553d8/);
    assert.doesNotMatch(unbranded, /<img /);

    await patchBranding(rest, { primary_color: { set: "#6a1b9a" } });
    const png = solidPng("#b71c1c", 80, 20);
    await patchBranding(
      rest,
      {
        primary_color: { set: "#b71c1c" },
        background_color: { set: "#fff8e1" },
        logo: image(png, "image/png"),
      },
      `?ctx.org_id=${orgId}`,
    );
    const instanceMail = await mailTo("instance-user");
    assert.match(instanceMail, /#6a1b9a/);
    assert.doesNotMatch(instanceMail, /#b71c1c/);

    const orgMail = await mailTo("org-user", `?ctx.org_id=${orgId}`);
    assert.match(orgMail, /background-color:#b71c1c|background:#b71c1c/);
    assert.match(orgMail, /#fff8e1/);
    const logoUrl = /<img src="([^"]+)"/.exec(orgMail)?.[1] ?? "";
    const origin = new URL(platform.url);
    assert.match(logoUrl, /^https?:\/\/[^/]+\/assets\/v3alpha\/instances\/[^/]+\/images\/[0-9a-f]{64}\.png$/);
    // the origin is the instance's external one; on the test server the path serves the image
    const served = await fetch(`${origin.origin}${new URL(logoUrl).pathname}`);
    assert.equal(served.status, 200);
    assert.deepEqual(Buffer.from(await served.arrayBuffer()), png);
  });
});
