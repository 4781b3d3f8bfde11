/**
 * One SMS through an HTTP provider: POSTed as JSON to its endpoint, signed like the calls to action
 * targets (`Platform-Signature`, src/execution/signing.ts), through an HttpCaller under the instance's
 * outbound guard (src/net/http.ts: the address is checked where the connection is made).
 */

import type { SmsConfig } from "../domain/notification/events.ts";
import { signatureHeader } from "../execution/signing.ts";
import { CallFailure, type HttpCaller } from "../net/http.ts";
import { ANSWER_WITHHELD, answerIsInternal } from "../net/outbound.ts";

/** What Platform POSTs to the endpoint (docs/notifications.md). */
export interface SmsMessage {
  recipient: string;
  text: string;
  /** What the message is for, e.g. `test`, `verify_phone`, `otp`. */
  message_type: string;
  /** The user it is sent to ("" when none, e.g. a test). */
  user_id: string;
  instance_id: string;
}

/**
 * Why a message was not handed over: the endpoint's status (and the start of its answer, unless the
 * endpoint's address is loopback or private: src/net/outbound.ts `answerIsInternal`) or no answer.
 */
export class SmsSendError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = "SmsSendError";
  }
}

/** POSTs the message; resolves on a 2xx answer, rejects with an SmsSendError otherwise. */
export async function sendSms(
  config: SmsConfig,
  signingKey: string,
  message: SmsMessage,
  caller: HttpCaller,
  timeoutMs: number,
): Promise<{ status: number }> {
  const body = JSON.stringify({
    recipient: message.recipient,
    text: message.text,
    message_type: message.message_type,
    user_id: message.user_id,
    instance_id: message.instance_id,
  });
  let answer: Awaited<ReturnType<HttpCaller["post"]>>;
  try {
    answer = await caller.post(
      config.endpoint,
      body,
      { "platform-signature": signatureHeader({ current: signingKey }, body) },
      timeoutMs,
    );
  } catch (error) {
    if (error instanceof CallFailure) throw new SmsSendError(`the endpoint ${error.message}`);
    throw error;
  }
  if (answer.status < 200 || answer.status > 299) {
    const text = answer.body.toString("utf8", 0, Math.min(answer.body.length, 200)).trim();
    const shown = !text
      ? ""
      : answerIsInternal(answer.remoteAddress)
        ? ` (answer body ${ANSWER_WITHHELD})`
        : `: ${text}`;
    throw new SmsSendError(`the endpoint answered ${answer.status}${shown}`, answer.status);
  }
  return { status: answer.status };
}
