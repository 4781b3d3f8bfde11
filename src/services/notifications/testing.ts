import assert from "node:assert/strict";
import type { LookupAddress } from "node:dns";
import net from "node:net";
import { after, before } from "node:test";
import {
  assertRejected,
  type RestReply,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { type SmtpReceiver, selfSignedCertificate, startSmtpReceiver } from "../../../test/smtp-receiver.ts";
import type { Resolve } from "../../net/outbound.ts";
import { addCallers } from "../actions/testing.ts";

/** Test support of the SMTP provider tests: a platform, two real SMTP servers and the callers. */

export const SMTP = "/resources/v3alpha/smtp_providers";
export const PASSWORD = "smtp-Pa55word";

/** `*.test` names answer these addresses (the platform's resolver seam). */
const NAMES: Record<string, string> = { "smtp.test": "127.0.0.1", "metadata.test": "169.254.169.254" };
const resolve: Resolve = async (hostname) => {
  const address = NAMES[hostname];
  if (!address) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
  return [{ address, family: net.isIP(address) } as LookupAddress];
};

export interface SmtpSuite {
  platform: TestPlatform;
  callers: Awaited<ReturnType<typeof addCallers>>;
  rest: ReturnType<typeof restClient>;
  /** The certificate `startTls` presents, trusted by the platform (`smtpCa`). */
  certificate: { cert: string; key: string };
  /** STARTTLS with the self-signed certificate, AUTH required; refuses recipients `reject*` with 550. */
  startTls: SmtpReceiver;
  /** No TLS offered, AUTH PLAIN in the clear allowed. */
  plain: SmtpReceiver;
}

/**
 * Registers the suite's before/after hooks in the calling `describe` and returns its fixture (filled when
 * the hooks ran) with helpers: a valid provider body for `startTls`, a create that asserts 201, and
 * assertRejected on the suite's platform.
 */
export function smtpSuite() {
  const s = { certificate: selfSignedCertificate(["smtp.test"]) } as SmtpSuite;
  before(async () => {
    s.startTls = await startSmtpReceiver({
      tls: s.certificate,
      auth: { user: "mailer", password: PASSWORD },
      rejectAnswer: { code: 550, text: "5.1.1 <reject@example.com>: mailbox unavailable" },
    });
    s.plain = await startSmtpReceiver({ auth: { user: "plain-user", password: PASSWORD } });
    s.platform = await startPlatform({ listen: true, resolve, smtpCa: [s.certificate.cert] });
    s.callers = await addCallers(s.platform);
    s.rest = restClient(s.platform, () => s.callers.owner);
  });
  after(async () => {
    await s.platform.stop();
    await s.startTls.close();
    await s.plain.close();
  });
  const valid = (extra: Record<string, unknown> = {}) => ({
    description: "mail relay",
    sender_address: "noreply@example.com",
    sender_name: "Platform",
    host: `smtp.test:${s.startTls.port}`,
    tls: true,
    user: "mailer",
    password: PASSWORD,
    ...extra,
  });
  const createProvider = async (body: unknown) => {
    const r = await s.rest("POST", SMTP, { json: body });
    assert.equal(r.status, 201, r.text);
    return r.json.details.id as string;
  };
  const rejects = (call: () => Promise<RestReply>, status: number, code: number, message?: RegExp | string) =>
    assertRejected(s.platform, call, status, code, message);
  return { s, valid, createProvider, rejects };
}
