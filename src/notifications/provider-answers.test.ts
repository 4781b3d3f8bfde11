import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import type { SmsConfig, SmtpConfig } from "../domain/notification/events.ts";
import type { CallAnswer, HttpCaller } from "../net/http.ts";
import type { OutboundGuard } from "../net/outbound.ts";
import { type SmsMessage, sendSms } from "./sms.ts";
import { sendEmail } from "./smtp.ts";

/**
 * What a provider's failed answer shows, by the address it came from: a public provider's answer is shown
 * (the administrator debugs the gateway with it), a loopback or private one's only by its status. The API
 * tests (src/services/notifications) cover the loopback side end to end; a public address cannot be
 * listened on here, so its side is shown with the address the connection reports.
 */
describe("provider answers: shown for public addresses, withheld for internal ones", () => {
  const PUBLIC = "93.184.215.14";
  const message: SmsMessage = {
    recipient: "+1",
    text: "t",
    message_type: "test",
    user_id: "",
    instance_id: "1",
  };
  const sms: SmsConfig = { description: "gw", type: "http", endpoint: "https://sms.example/send" };
  const answering = (remoteAddress: string | undefined) =>
    ({
      post: async (): Promise<CallAnswer> => ({
        status: 503,
        headers: {},
        body: Buffer.from("gateway out of credit"),
        remoteAddress,
      }),
    }) as unknown as HttpCaller;

  it("SMS: the start of the body from a public address, the status alone from loopback, private or unknown", async () => {
    await assert.rejects(sendSms(sms, "key", message, answering(PUBLIC), 1000), {
      message: "the endpoint answered 503: gateway out of credit",
    });
    for (const address of ["127.0.0.1", "::ffff:10.1.2.3", "192.168.1.20", undefined]) {
      await assert.rejects(sendSms(sms, "key", message, answering(address), 1000), {
        message: "the endpoint answered 503 (answer body withheld: the provider's address is private)",
      });
    }
  });

  describe("SMTP", () => {
    let server: net.Server;
    let port: number;
    before(async () => {
      server = net.createServer((socket) => {
        socket.on("error", () => {});
        socket.end("554 5.7.1 banner of a secret service\r\n");
      });
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      port = (server.address() as net.AddressInfo).port;
    });
    after(() => new Promise((r) => server.close(r)));

    /** A guard connecting to the local server; the socket reports `reported` as its peer. */
    const guardReporting = (reported?: string) =>
      ({
        connect: () => {
          const socket = net.connect({ host: "127.0.0.1", port });
          if (reported) Object.defineProperty(socket, "remoteAddress", { get: () => reported });
          return socket;
        },
      }) as unknown as OutboundGuard;
    const smtp: SmtpConfig = {
      description: "relay",
      sender_address: "noreply@example.com",
      sender_name: "",
      host: "smtp.example:25",
      tls: false,
    };
    const send = (reported?: string) =>
      sendEmail(
        smtp,
        undefined,
        { to: "a@example.com", subject: "s", text: "t" },
        {
          guard: guardReporting(reported),
          timeoutMs: 5000,
        },
      );

    it("the server's answer from a public address, its reply code alone from loopback", async () => {
      await assert.rejects(send(PUBLIC), (e: Error & { response?: string }) => {
        assert.match(e.response ?? "", /^554 5\.7\.1 banner of a secret service/);
        return true;
      });
      await assert.rejects(send(), (e: Error & { response?: string }) => {
        assert.equal(e.response, "554 (answer text withheld: the provider's address is private)");
        assert.ok(!e.message.includes("secret"), e.message);
        return true;
      });
    });
  });
});
