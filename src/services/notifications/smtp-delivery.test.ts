import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import net from "node:net";
import { describe, it } from "node:test";
import { selfSignedCertificate, startSmtpReceiver } from "../../../test/smtp-receiver.ts";
import { PASSWORD, SMTP, smtpSuite } from "./testing.ts";

/** `_test` of SMTP providers: real messages to real SMTP servers, and how failures are answered. */
describe("notification providers: SMTP test messages", () => {
  const { s, valid, createProvider } = smtpSuite();

  it("_test sends a real message over STARTTLS with AUTH", async () => {
    const id = await createProvider(valid({ reply_to_address: "help@example.com" }));
    const r = await s.rest("POST", `${SMTP}/${id}/_test`, {
      json: { receiver_address: "alice@example.com" },
    });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, {});
    const last = s.startTls.received.at(-1)!;
    assert.equal(last.secure, true, "upgraded with STARTTLS");
    assert.equal(last.user, "mailer");
    assert.deepEqual(last.envelope, { from: "noreply@example.com", to: ["alice@example.com"] });
    assert.equal(last.mail.from?.text, '"Platform" <noreply@example.com>');
    assert.equal(last.mail.replyTo?.text, "help@example.com");
    assert.equal(last.mail.subject, "Test message");
    assert.match(last.mail.text ?? "", /test message of the SMTP provider "mail relay"/);
  });

  it("_test maps the server's refusal to FAILED_PRECONDITION with its reply code; a loopback server's text is withheld", async () => {
    const id = await createProvider(valid());
    const r = await s.rest("POST", `${SMTP}/${id}/_test`, {
      json: { receiver_address: "reject@example.com" },
    });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.code, 9);
    assert.equal(
      r.json.message,
      "the SMTP server answered: 550 (answer text withheld: the provider's address is private)",
    );

    const wrong = await createProvider(valid({ password: "wrong" }));
    const denied = await s.rest("POST", `${SMTP}/${wrong}/_test`, {
      json: { receiver_address: "a@example.com" },
    });
    assert.equal(denied.status, 400);
    assert.equal(
      denied.json.message,
      "the SMTP server answered: 535 (answer text withheld: the provider's address is private)",
    );
    assert.ok(!denied.text.includes("credentials invalid"));
  });

  it("tls: true requires encryption; tls: false sends in the clear with AUTH PLAIN", async () => {
    const required = await createProvider(
      valid({ host: `smtp.test:${s.plain.port}`, user: "plain-user", password: PASSWORD }),
    );
    const refused = await s.rest("POST", `${SMTP}/${required}/_test`, {
      json: { receiver_address: "a@example.com" },
    });
    assert.equal(refused.status, 400, refused.text);
    assert.equal(refused.json.code, 9);
    assert.match(refused.json.message, /STARTTLS/);
    assert.equal(s.plain.received.length, 0);

    const open = await createProvider(
      valid({ host: `smtp.test:${s.plain.port}`, tls: false, user: "plain-user", password: PASSWORD }),
    );
    const sent = await s.rest("POST", `${SMTP}/${open}/_test`, {
      json: { receiver_address: "bob@example.com" },
    });
    assert.equal(sent.status, 200, sent.text);
    assert.equal(s.plain.received.length, 1);
    assert.equal(s.plain.received[0].secure, false);
    assert.equal(s.plain.received[0].user, "plain-user");
    assert.deepEqual(s.plain.received[0].envelope.to, ["bob@example.com"]);
  });

  it("_test against another service on loopback answers its status only, never what it sent", async () => {
    // not an SMTP server: a service of the host that greets every connection with data of its own
    const secret = "pat-host-only-5d1e";
    const service = net.createServer((socket) => {
      socket.on("error", () => {});
      socket.end(`{"api_token":"${secret}"}\r\n`);
    });
    await new Promise<void>((r) => service.listen(0, "127.0.0.1", r));
    try {
      const port = (service.address() as AddressInfo).port;
      const id = await createProvider(
        valid({ host: `smtp.test:${port}`, tls: false, user: undefined, password: undefined }),
      );
      const r = await s.rest("POST", `${SMTP}/${id}/_test`, { json: { receiver_address: "a@example.com" } });
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json.code, 9);
      assert.equal(
        r.json.message,
        "the SMTP server answered: no reply code (answer text withheld: the provider's address is private)",
      );
      assert.ok(!r.text.includes(secret));
    } finally {
      await new Promise((r) => service.close(r));
    }
  });

  it("the server's certificate is verified: an untrusted one fails the test delivery", async () => {
    const untrusted = await startSmtpReceiver({ tls: selfSignedCertificate(["smtp.test"]) });
    try {
      const id = await createProvider(
        valid({ host: `smtp.test:${untrusted.port}`, user: undefined, password: undefined }),
      );
      const r = await s.rest("POST", `${SMTP}/${id}/_test`, { json: { receiver_address: "a@example.com" } });
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json.code, 9);
      assert.match(r.json.message, /self[- ]signed certificate/);
      assert.equal(untrusted.received.length, 0);
    } finally {
      await untrusted.close();
    }
  });

  it("tls: true on port 465 speaks implicit TLS", async (t) => {
    // 465 is a privileged port: the test runs only where it can listen there
    const implicit = await startSmtpReceiver({
      tls: s.certificate,
      implicitTls: true,
      port: 465,
      auth: { user: "mailer", password: PASSWORD },
    }).catch((error: NodeJS.ErrnoException) => error);
    if (implicit instanceof Error) {
      t.skip(`cannot listen on 127.0.0.1:465 (${implicit.code ?? implicit.message})`);
      return;
    }
    try {
      const id = await createProvider(valid({ host: "smtp.test:465" }));
      const r = await s.rest("POST", `${SMTP}/${id}/_test`, {
        json: { receiver_address: "tls@example.com" },
      });
      assert.equal(r.status, 200, r.text);
      assert.equal(implicit.received.length, 1);
      assert.equal(implicit.received[0].secure, true);
      assert.deepEqual(implicit.received[0].envelope.to, ["tls@example.com"]);
    } finally {
      await implicit.close();
    }
  });

  it("a host name resolving to a metadata address is refused at connect time", async () => {
    const id = await createProvider(valid({ host: "metadata.test:25" }));
    const r = await s.rest("POST", `${SMTP}/${id}/_test`, { json: { receiver_address: "a@example.com" } });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.code, 9);
    assert.match(r.json.message, /metadata\.test resolves to a cloud metadata address/);
  });
});
