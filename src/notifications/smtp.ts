/**
 * One e-mail through an SMTP provider (nodemailer), over a connection the outbound-address policy opened
 * (src/net/outbound.ts): nodemailer's `getSocket` hands it a TCP socket from the guard's `connect`, which
 * checks an IP literal at once and every address a name resolves to at connect time, so nothing reaches
 * a refused address, whatever DNS answers between a check and the connection. TLS is nodemailer's own on
 * top of that socket (implicit on port 465, STARTTLS otherwise), verified against the system's CAs.
 */
import net from "node:net";
import { createTransport } from "nodemailer";
import type { SmtpConfig } from "../domain/notification/events.ts";
import { ANSWER_WITHHELD, answerIsInternal, type OutboundGuard } from "../net/outbound.ts";

/** Port of implicit TLS (SMTPS, RFC 8314); every other port speaks plain SMTP first (STARTTLS). */
export const IMPLICIT_TLS_PORT = 465;

export interface EmailMessage {
  to: string;
  subject: string;
  text: string;
  html?: string;
}

export interface SmtpOptions {
  guard: OutboundGuard;
  /** Bound of each phase: connecting, the greeting, and inactivity during the exchange (ms). */
  timeoutMs: number;
  /** Certificates trusted besides the system's (tests: a server with a self-signed certificate). */
  ca?: string[];
}

/**
 * Why a message was not sent: the server's answer (`response`, e.g. `550 5.1.1 ...`) when it gave one. From
 * a server at a loopback or private address (src/net/outbound.ts `answerIsInternal`) only the reply code is
 * kept: its text (a banner, an error) could be another service's, e.g. when the "SMTP server" is not one.
 */
export class SmtpSendError extends Error {
  constructor(
    message: string,
    readonly response?: string,
    readonly code?: string,
  ) {
    super(message);
    this.name = "SmtpSendError";
  }
}

/** `host:port` → its parts; undefined unless the port is given and 1 to 65535 (IPv6 in brackets). */
export function parseHostPort(value: string): { host: string; port: number } | undefined {
  const match = /^(\[[0-9A-Fa-f:.]+\]|[^:[\]\s/@]+):(\d{1,5})$/.exec(value);
  if (!match) return undefined;
  const port = Number(match[2]);
  if (port < 1 || port > 65535) return undefined;
  const host = match[1].startsWith("[") ? match[1].slice(1, -1) : match[1];
  if (match[1].startsWith("[") && net.isIPv6(host) === false) return undefined;
  return { host, port };
}

/** Sends one message; resolves with the server's final answer, rejects with an SmtpSendError. */
export async function sendEmail(
  config: SmtpConfig,
  password: string | undefined,
  message: EmailMessage,
  options: SmtpOptions,
): Promise<{ response: string; messageId: string }> {
  const session = openSmtp(config, password, options);
  try {
    return await session.send(message);
  } finally {
    session.close();
  }
}

/** Messages sent through one provider by one transport (./smtp.ts `openSmtp`); closed by its user. */
export interface SmtpSession {
  /** Resolves with the server's final answer, rejects with an SmtpSendError. */
  send(message: EmailMessage): Promise<{ response: string; messageId: string }>;
  close(): void;
}

/**
 * A transport of the provider: one connection per message, or with `pool` up to that many connections,
 * each carrying message after message (the outbox worker sends a claimed batch so: no connection set-up,
 * TLS and AUTH per message). Every connection is opened by the guard.
 */
export function openSmtp(
  config: SmtpConfig,
  password: string | undefined,
  options: SmtpOptions,
  pool?: number,
): SmtpSession {
  const address = parseHostPort(config.host);
  if (!address) {
    const refusal = new SmtpSendError(`host "${config.host}" is not host:port`);
    return { send: () => Promise.reject(refusal), close: () => {} };
  }
  const implicit = config.tls && address.port === IMPLICIT_TLS_PORT;
  // whether a connection of this transport went to an internal address: its answers are then withheld
  let internal = false;
  const transport = createTransport({
    ...(pool ? { pool: true as const, maxConnections: pool, maxMessages: Number.POSITIVE_INFINITY } : {}),
    host: address.host,
    port: address.port,
    secure: implicit,
    // tls: STARTTLS is required (a server that does not offer it fails); otherwise it is used when offered
    requireTLS: config.tls && !implicit,
    auth: config.user ? { user: config.user, pass: password ?? "" } : undefined,
    tls: {
      servername: net.isIP(address.host) ? undefined : address.host,
      ...(options.ca ? { ca: options.ca } : {}),
    },
    connectionTimeout: options.timeoutMs,
    greetingTimeout: options.timeoutMs,
    socketTimeout: options.timeoutMs,
    getSocket: (_settings, callback) => {
      const socket = options.guard.connect({ host: address.host, port: address.port });
      const timer = setTimeout(
        () => socket.destroy(new Error(`connecting timed out after ${options.timeoutMs} ms`)),
        options.timeoutMs,
      );
      socket.once("connect", () => {
        clearTimeout(timer);
        if (answerIsInternal(socket.remoteAddress)) internal = true;
        socket.removeListener("error", onError);
        callback(null, { connection: socket });
      });
      const onError = (error: Error) => {
        clearTimeout(timer);
        callback(error);
      };
      socket.once("error", onError);
    },
  });
  const from = config.sender_name
    ? { name: config.sender_name, address: config.sender_address }
    : config.sender_address;
  return {
    async send(message) {
      try {
        const info = await transport.sendMail({
          from,
          replyTo: config.reply_to_address,
          to: message.to,
          subject: message.subject,
          text: message.text,
          html: message.html,
        });
        return { response: info.response, messageId: info.messageId };
      } catch (error) {
        const e = error as Error & { response?: string; code?: string; command?: string };
        if (!internal || !e.response) throw new SmtpSendError(e.message, e.response, e.code);
        // nodemailer's message embeds the answer too: both are replaced by the reply code (if any)
        const reply = /^\d{3}(?=[\s-]|$)/.exec(e.response)?.[0];
        const withheld = `${reply ?? "no reply code"} (answer text ${ANSWER_WITHHELD})`;
        throw new SmtpSendError(
          `${e.code ?? "error"}${e.command ? ` after ${e.command}` : ""}: ${withheld}`,
          withheld,
          e.code,
        );
      }
    },
    close: () => transport.close(),
  };
}
