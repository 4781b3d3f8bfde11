/**
 * The account page's e-mail address and phone number: changing them and proving them with a code.
 *
 *   POST /ui/login/account/email           a new address (required: the e-mail address cannot be removed)
 *   POST /ui/login/account/phone           a new number; empty removes the phone
 *   POST /ui/login/account/{email,phone}/verify   the code sent to the unverified address
 *   POST /ui/login/account/{email,phone}/code     a new code
 *
 * A change (not a code's check, nor a new code) needs the proof of ./confirm.ts: the current password, or
 * for a user without one a recent sign-in; its posts are rate-limited like the password form (per IP and
 * per login name), the others per IP like the page's other forms. The rules are the users API's: a value is
 * checked against PatchUser's declared field rules (`PatchHumanEmail.address`, `PatchHumanPhone.number`),
 * the change is decided by the same domain function (`changeUserEvents`: a changed address is unverified)
 * and the same code commands (`UserCodes.codesOnChange`: VERIFY_EMAIL or VERIFY_PHONE with its code when
 * a provider of the channel is active, at most 3 codes a minute for a user), appended with the user as
 * creator in one transaction; the checks and new codes are VerifyEmail/VerifyPhone and
 * SendEmailCode/SendPhoneCode (../code-kit.ts). The page says when no code could be sent.
 */
import { create } from "@bufbuild/protobuf";
import type { FastifyInstance } from "fastify";
import { rejectNul, validate } from "../../../api/validate.ts";
import { changeUserEvents, foldUser, requireHuman } from "../../../domain/user/commands.ts";
import { USER, type UserChangedPayload } from "../../../domain/user/events.ts";
import { InvalidArgumentError, NotFoundError } from "../../../errors.ts";
import {
  PatchHumanEmailSchema,
  PatchHumanPhoneSchema,
} from "../../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import type { Translator } from "../../i18n.ts";
import type { Login } from "../../login.ts";
import { type CodeOutcome, codesOf, normalCode, sendChannelCode, verifyChannelCode } from "../code-kit.ts";
import { field, type StepKit } from "../kit.ts";
import { confirmChange, RECENT_SIGN_IN_SECONDS } from "./confirm.ts";
import type { AccountUser } from "./index.ts";
import { type AccountOutcome, accountPost, redirectWithOutcome } from "./kit.ts";

export type ContactChannel = "email" | "phone";

/** Per channel: the form's field, PatchUser's rule for it, and the message keys of the outcomes. */
const CHANNELS = {
  email: {
    field: "email",
    label: "account.newEmail",
    type: "email",
    autocomplete: "email",
    maxLength: 320,
    schema: PatchHumanEmailSchema,
    member: "address",
    invalid: "field.emailInvalid",
    changed: "account.emailChanged",
    changedNoCode: "account.emailChangedNoCode",
    verified: "account.emailVerified",
    unavailable: "error.emailUnavailable",
    codeHelp: "code.help",
  },
  phone: {
    field: "phone",
    label: "account.newPhone",
    type: "tel",
    autocomplete: "tel",
    maxLength: 50,
    schema: PatchHumanPhoneSchema,
    member: "number",
    invalid: "field.phoneInvalid",
    changed: "account.phoneChanged",
    changedNoCode: "account.phoneChangedNoCode",
    verified: "account.phoneVerified",
    unavailable: "error.smsUnavailable",
    codeHelp: "account.phoneCodeHelp",
  },
} as const;

/** The name of a channel's code field (one page holds both). */
const codeFieldName = (channel: ContactChannel) => `${channel}Code`;
/** The name of a channel's current password field (the password form has its own). */
const passwordFieldName = (channel: ContactChannel) => `${channel}Password`;

/** The error key of a new address under PatchUser's rules (and the form's: the e-mail address is required). */
function problemOf(channel: ContactChannel, value: string): string | undefined {
  const spec = CHANNELS[channel];
  if (channel === "email" && value === "") return "field.required";
  if (value === "") return undefined; // removes the phone
  if ([...value].length > spec.maxLength) return spec.invalid;
  const patch = create(spec.schema, { [spec.member]: value });
  try {
    rejectNul(spec.schema, patch);
    validate(spec.schema, patch);
  } catch (error) {
    if (!(error instanceof InvalidArgumentError)) throw error;
    return spec.invalid;
  }
  return undefined;
}

/** What a change of an address did: nothing (the same address), or changed, with its code's outcome. */
type ChangeResult = { changed: false } | { changed: true; code?: CodeOutcome };

/**
 * Changes the user's address of `channel` as PatchUser does (an address given again keeps its
 * verification; a new one is unverified and gets its code when a provider is active).
 */
async function changeAddress(
  login: Login,
  instanceId: string,
  userId: string,
  channel: ContactChannel,
  value: string,
): Promise<ChangeResult> {
  const codes = codesOf(login);
  const change: UserChangedPayload = channel === "email" ? { email: value } : { phone: value || null };
  let result: ChangeResult = { changed: false };
  await login.deps.eventStore.push({ instanceId, creator: userId }, async (tx) => {
    const user = foldUser(await tx.load(USER, userId));
    if (!user) throw new NotFoundError("user not found");
    requireHuman(user, channel === "email" ? "e-mail addresses" : "phone numbers");
    const events = changeUserEvents(user, change);
    const sent = await codes.codesOnChange(tx, instanceId, user, events);
    if (!events.length) result = { changed: false };
    else if (!value) result = { changed: true };
    else if (sent.length) result = { changed: true, code: "sent" };
    // codesOnChange sends nothing beyond the rate limit or without a provider: which one, for the page
    else
      result = {
        changed: true,
        code: (await codes.providerActive(tx, instanceId, channel)) ? "limit" : "off",
      };
    return [...events, ...sent];
  });
  return result;
}

/** The user's address of `channel` as the users read model has it ("" for none). */
async function currentAddress(login: Login, instanceId: string, userId: string, channel: ContactChannel) {
  const rows = await login.deps.db.query<{ email: string | null; phone: string | null }>(
    "SELECT email, phone FROM users WHERE instance_id = $1 AND id = $2",
    [instanceId, userId],
  );
  return rows[0]?.[channel] ?? "";
}

/** The outcome of a new code, for the page: a notice, or an error saying why no code went out. */
function codeOutcome(channel: ContactChannel, code: CodeOutcome | undefined): Partial<AccountOutcome> {
  if (code === "off") return { error: CHANNELS[channel].unavailable };
  if (code === "limit") return { error: "error.tooManyCodes" };
  return {};
}

/** The section's forms for the page: the new address fields and the code fields, with their errors. */
export function contactFields(
  t: Translator["t"],
  user: AccountUser,
  states: Record<ContactChannel, { fieldErrors: Record<string, string>; values: Record<string, string> }>,
) {
  const make = (channel: ContactChannel) => {
    const spec = CHANNELS[channel];
    const state = states[channel];
    const current = channel === "email" ? user.email : user.phone;
    const verified = channel === "email" ? user.emailVerified : user.phoneVerified;
    const statusId = `${channel}-status`;
    const addressError = state.fieldErrors[spec.field];
    const address: Record<string, unknown> = {
      name: spec.field,
      label: t(spec.label),
      type: spec.type,
      autocomplete: spec.autocomplete,
      value: state.values[spec.field] ?? current,
      maxLength: spec.maxLength,
      optional: channel === "phone",
      error: addressError,
      describedBy: [...(addressError ? [`${spec.field}-error`] : []), statusId],
      autofocus: addressError !== undefined,
    };
    const codeName = codeFieldName(channel);
    const codeError = state.fieldErrors[codeName];
    const code: Record<string, unknown> = {
      name: codeName,
      label: t("code.label"),
      type: "text",
      autocomplete: "one-time-code",
      autocapitalize: "characters",
      maxLength: 64,
      value: "",
      error: codeError,
      describedBy: [...(codeError ? [`${codeName}-error`] : []), `${codeName}-help`],
      autofocus: codeError !== undefined,
      after: `<p class="help" id="${codeName}-help">${escapeHtml(t(spec.codeHelp))}</p>`,
    };
    const passwordName = passwordFieldName(channel);
    const passwordError = state.fieldErrors[passwordName];
    const password: Record<string, unknown> = {
      name: passwordName,
      label: t("account.currentPassword"),
      type: "password",
      autocomplete: "current-password",
      error: passwordError,
      describedBy: [...(passwordError ? [`${passwordName}-error`] : []), `${passwordName}-help`],
      autofocus: passwordError !== undefined && addressError === undefined,
      after: `<p class="help" id="${passwordName}-help">${escapeHtml(t("account.contactPasswordHelp"))}</p>`,
    };
    return {
      current,
      statusId,
      status: current ? t(verified ? "account.verified" : "account.unverified") : t("account.none"),
      address,
      // the proof a change needs (./confirm.ts): the current password, else a recent sign-in
      password: user.hasPassword ? password : undefined,
      signInAgain: user.hasPassword
        ? undefined
        : t("account.contactSignInHelp", { minutes: RECENT_SIGN_IN_SECONDS / 60 }),
      // a code field only for an address to prove
      code: current && !verified ? code : undefined,
    };
  };
  return { email: make("email"), phone: make("phone") };
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export function accountContactStep(ui: FastifyInstance, kit: StepKit): void {
  for (const channel of ["email", "phone"] as const) {
    const spec = CHANNELS[channel];

    ui.post(`/login/account/${channel}`, async (request, reply) => {
      const post = await accountPost(kit, request, reply);
      if (!post) return reply;
      const { agent, account, body } = post;
      // the proof is a password check: limited as the password form is
      const tooMany = await kit.limitPassword(request, reply, undefined, account.loginName);
      if (tooMany) return reply;
      // "Remove phone number" is the phone form's second button
      const remove = channel === "phone" && field(body, "remove") === "true";
      const value = remove ? "" : field(body, spec.field).slice(0, spec.maxLength + 1);
      const problem = problemOf(channel, value);
      const outcome = { session: account.id, form: channel } as const;
      if (problem)
        return redirectWithOutcome(kit, request, reply, {
          ...outcome,
          error: "error.formInvalid",
          fieldErrors: { [spec.field]: problem },
          values: { [spec.field]: value },
        });
      const instanceId = kit.login.instanceId(request);
      // the address it is already: nothing to confirm, nothing changes
      if (value === (await currentAddress(kit.login, instanceId, account.userId, channel)))
        return redirectWithOutcome(kit, request, reply, { ...outcome, notice: "account.contactUnchanged" });
      const unconfirmed = await confirmChange(kit.login, request, {
        agent,
        account,
        password: field(body, passwordFieldName(channel), { raw: true }),
        passwordField: passwordFieldName(channel),
      });
      if (unconfirmed)
        return redirectWithOutcome(kit, request, reply, {
          ...outcome,
          ...("field" in unconfirmed
            ? { error: "error.formInvalid", fieldErrors: { [unconfirmed.field]: unconfirmed.key } }
            : { error: unconfirmed.key }),
          values: { [spec.field]: value },
        });
      const result = await changeAddress(kit.login, instanceId, account.userId, channel, value);
      if (!result.changed)
        return redirectWithOutcome(kit, request, reply, { ...outcome, notice: "account.contactUnchanged" });
      if (!value)
        return redirectWithOutcome(kit, request, reply, { ...outcome, notice: "account.phoneRemoved" });
      return redirectWithOutcome(kit, request, reply, {
        ...outcome,
        notice: result.code === "sent" ? spec.changed : spec.changedNoCode,
        ...codeOutcome(channel, result.code),
      });
    });

    ui.post(`/login/account/${channel}/verify`, async (request, reply) => {
      const post = await accountPost(kit, request, reply);
      if (!post) return reply;
      const tooMany = await kit.limitPerIp(request, reply, undefined);
      if (tooMany) return reply;
      const { account, body } = post;
      const codeName = codeFieldName(channel);
      const code = normalCode(field(body, codeName));
      const outcome = { session: account.id, form: channel } as const;
      const wrong = (key: string) =>
        redirectWithOutcome(kit, request, reply, {
          ...outcome,
          error: "error.formInvalid",
          fieldErrors: { [codeName]: key },
        });
      if (!code) return wrong("field.required");
      const instanceId = kit.login.instanceId(request);
      if (!(await verifyChannelCode(kit.login, instanceId, account.userId, channel, code)))
        return wrong("field.codeInvalid");
      return redirectWithOutcome(kit, request, reply, { ...outcome, notice: spec.verified });
    });

    ui.post(`/login/account/${channel}/code`, async (request, reply) => {
      const post = await accountPost(kit, request, reply);
      if (!post) return reply;
      const tooMany = await kit.limitPerIp(request, reply, undefined);
      if (tooMany) return reply;
      const { account } = post;
      const instanceId = kit.login.instanceId(request);
      const sent = await sendChannelCode(kit.login, instanceId, account.userId, channel);
      return redirectWithOutcome(kit, request, reply, {
        session: account.id,
        form: channel,
        ...(sent === "sent" ? { notice: "verifyEmail.resent" } : {}),
        ...(sent === "none" ? { error: "account.nothingToVerify" } : codeOutcome(channel, sent)),
      });
    });
  }
}
