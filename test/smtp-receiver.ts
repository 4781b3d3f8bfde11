/**
 * A real SMTP server on a loopback port for the notification tests (smtp-server), keeping every message it
 * accepts parsed (mailparser), and a self-signed certificate for its STARTTLS.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { type ParsedMail, simpleParser } from "mailparser";
import { SMTPServer, type SMTPServerOptions } from "smtp-server";
import { tempDir } from "./helpers.ts";

/** A self-signed certificate (and its key, PEM) for `names`, made with openssl. */
export function selfSignedCertificate(names: string[]): { cert: string; key: string } {
  const dir = tempDir("smtp-tls-");
  try {
    const certFile = path.join(dir, "cert.pem");
    const keyFile = path.join(dir, "key.pem");
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        `/CN=${names[0]}`,
        "-addext",
        `subjectAltName=${names.map((n) => `DNS:${n}`).join(",")}`,
        "-keyout",
        keyFile,
        "-out",
        certFile,
      ],
      { stdio: "ignore" },
    );
    return { cert: readFileSync(certFile, "utf8"), key: readFileSync(keyFile, "utf8") };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface ReceivedMail {
  mail: ParsedMail;
  /** Whether the message came over TLS (STARTTLS or implicit). */
  secure: boolean;
  /** The AUTH user, if the client authenticated. */
  user?: string;
  envelope: { from: string; to: string[] };
}

export interface SmtpReceiver {
  port: number;
  received: ReceivedMail[];
  close(): Promise<void>;
}

export interface SmtpReceiverOptions {
  /** Offer STARTTLS with this certificate (else no STARTTLS). */
  tls?: { cert: string; key: string };
  /** Require AUTH with these credentials (else no AUTH). */
  auth?: { user: string; password: string };
  /** TLS from the first byte (implicit TLS, needs `tls`) instead of STARTTLS. */
  implicitTls?: boolean;
  /** The port (default: a free one). */
  port?: number;
  /** Recipients whose local part starts with `reject` are refused with this answer. */
  rejectAnswer?: { code: number; text: string };
  /** Answers RCPT TO for `address` with this refusal when it returns one (after `rejectAnswer`). */
  refuseRcpt?: (address: string) => { code: number; text: string } | undefined;
}

/** Starts a server on 127.0.0.1 (a free port unless `port` is given; rejects when it cannot listen). */
export async function startSmtpReceiver(options: SmtpReceiverOptions): Promise<SmtpReceiver> {
  const received: ReceivedMail[] = [];
  const settings: SMTPServerOptions = {
    logger: false,
    banner: "test receiver",
    ...(options.tls ? { key: options.tls.key, cert: options.tls.cert } : { hideSTARTTLS: true }),
    secure: options.implicitTls === true,
    authOptional: !options.auth,
    // AUTH without TLS only where the test server offers no TLS at all
    allowInsecureAuth: !options.tls,
    // without a certificate no STARTTLS at all (smtp-server would still answer it with a built-in one)
    disabledCommands: [...(options.auth ? [] : ["AUTH"]), ...(options.tls ? [] : ["STARTTLS"])],
    onAuth(auth, _session, callback) {
      if (auth.username === options.auth?.user && auth.password === options.auth?.password)
        callback(null, { user: auth.username });
      else
        callback(Object.assign(new Error("5.7.8 Authentication credentials invalid"), { responseCode: 535 }));
    },
    onRcptTo(address, _session, callback) {
      if (options.rejectAnswer && address.address.startsWith("reject")) {
        const { code, text } = options.rejectAnswer;
        callback(Object.assign(new Error(text), { responseCode: code }));
        return;
      }
      const refusal = options.refuseRcpt?.(address.address);
      if (refusal) {
        callback(Object.assign(new Error(refusal.text), { responseCode: refusal.code }));
        return;
      }
      callback();
    },
    onData(stream, session, callback) {
      simpleParser(stream).then(
        (mail) => {
          received.push({
            mail,
            secure: session.secure,
            user: session.user as string | undefined,
            envelope: {
              from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
              to: session.envelope.rcptTo.map((r) => r.address),
            },
          });
          callback();
        },
        (error: Error) => callback(error),
      );
    },
  };
  const server = new SMTPServer(settings);
  await new Promise<void>((resolve, reject) => {
    server.server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", resolve);
  });
  const port = (server.server.address() as AddressInfo).port;
  return {
    port,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
