/**
 * The account page's one-time-password factors (a section of ./account.eta, security-otp.eta): an
 * authenticator app (TOTP: add with a QR code and the secret, verify with a code, remove), codes by e-mail
 * and by SMS (enable, disable), recovery codes (generate: shown once on the page after the post; the number
 * left; remove).
 *
 *   POST /ui/login/account/otp/totp           register (a pending registration shown with its QR code)
 *   POST /ui/login/account/otp/totp/verify    activate it with a code (rate-limited per login name too; it
 *                                             counts as a TOTP check of the account's session)
 *   POST /ui/login/account/otp/totp/remove    remove it (also a pending one)
 *   POST /ui/login/account/otp/email          `action=enable|disable`
 *   POST /ui/login/account/otp/sms            `action=enable|disable`
 *   POST /ui/login/account/otp/recovery       new codes (replacing earlier ones)
 *   POST /ui/login/account/otp/recovery/remove
 *
 * The commands are the users API's (src/services/users/factor-commands.ts), the user as creator. The rule
 * of every change to how an account signs in applies (../../sign-in-changes.ts): an account with a second
 * factor changes its factors only from a session that passed one (`maySignInChange`), whoever added the
 * factor and when, and a factor is removed only by a session that verified one at least as strong
 * (`mayRemoveFactor`). New recovery codes travel to the page once in the outcome cookie (HttpOnly, two
 * minutes, read once).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { renderSVG } from "uqr";
import type { SignInFactor } from "../../../domain/session/sign-in-changes.ts";
import { foldUser, type UserAggregate } from "../../../domain/user/commands.ts";
import { USER } from "../../../domain/user/events.ts";
import { readFactor } from "../../../domain/user/factors/common.ts";
import { remainingRecoveryCodes } from "../../../domain/user/factors/recovery-codes.ts";
import {
  pendingTotpSecret,
  totpEnrolmentCheck,
  totpLabel,
  totpUri,
} from "../../../domain/user/factors/totp.ts";
import {
  AlreadyExistsError,
  FailedPreconditionError,
  InvalidArgumentError,
  NotFoundError,
} from "../../../errors.ts";
import type { CommandTx, NewEvent } from "../../../eventstore/types.ts";
import { UserFactorCommands } from "../../../services/users/factor-commands.ts";
import type { Translator } from "../../i18n.ts";
import type { Login } from "../../login.ts";
import type { LoginSession } from "../../sessions.ts";
import { mayRemoveFactor, maySignInChange } from "../../sign-in-changes.ts";
import { field, type StepKit } from "../kit.ts";
import { checkOnSession, groupedSecret, masterKeyOf } from "../mfa/kit.ts";
import { type AccountOutcome, accountPost, redirectWithOutcome } from "./kit.ts";

/** What the section shows of the account's factors. */
export async function securityOtpView(
  login: Login,
  instanceId: string,
  account: LoginSession,
  state: {
    error?: string;
    notice?: string;
    fieldErrors: Record<string, string>;
    values: Record<string, string>;
  },
  t: Translator["t"],
) {
  const { db } = login.deps;
  const [totp, email, sms, recovery, allowed, contact] = await Promise.all([
    readFactor(db, instanceId, account.userId, "totp"),
    readFactor(db, instanceId, account.userId, "otp_email"),
    readFactor(db, instanceId, account.userId, "otp_sms"),
    readFactor(db, instanceId, account.userId, "recovery_codes"),
    maySignInChange(login, instanceId, account),
    db.query<{ email_verified: boolean | null; phone_verified: boolean | null; phone: string | null }>(
      "SELECT email_verified, phone_verified, phone FROM users WHERE instance_id = $1 AND id = $2",
      [instanceId, account.userId],
    ),
  ]);
  // a pending registration of the last minutes is shown with its QR code until it is verified or removed
  const secret = allowed
    ? pendingTotpSecret(masterKeyOf(login), instanceId, account.userId, totp)
    : undefined;
  let pending: { qr: string; secret: string } | undefined;
  if (secret) {
    const { issuer, account: name } = await totpLabel(db, instanceId, account.userId);
    pending = {
      qr: renderSVG(totpUri(issuer, name, secret)).replace(
        "<svg ",
        '<svg width="200" height="200" aria-hidden="true" focusable="false" ',
      ),
      secret: groupedSecret(secret),
    };
  }
  const codeError = state.fieldErrors.code;
  return {
    ...state,
    allowed,
    totp: { active: totp?.active === true, pending },
    codeField: {
      name: "code",
      label: t("accountOtp.totpCode"),
      type: "text",
      autocomplete: "one-time-code",
      autocapitalize: "characters",
      maxLength: 64,
      value: "",
      error: codeError,
      describedBy: codeError ? ["code-error"] : [],
      autofocus: Boolean(codeError),
    },
    email: { enabled: Boolean(email), available: contact[0]?.email_verified === true },
    sms: {
      enabled: Boolean(sms),
      available: contact[0]?.phone_verified === true && Boolean(contact[0]?.phone),
    },
    recovery: {
      exists: Boolean(recovery),
      remaining: remainingRecoveryCodes(recovery),
      // new codes, once, right after they were made
      codes: state.values.codes ? state.values.codes.split(" ") : [],
    },
  };
}

type Decide = (
  commands: UserFactorCommands,
  tx: CommandTx,
  instanceId: string,
  user: UserAggregate,
) => Promise<NewEvent[]> | NewEvent[];

export function accountSecurityOtpStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;

  /**
   * One post of the section: the account checked, rate-limited, allowed to change its factors; `decide`
   * runs in a command on the user; a refusal becomes the section's error.
   */
  function route(
    path: string,
    handle: (
      run: (decide: Decide) => Promise<void>,
      body: Record<string, unknown>,
      account: LoginSession,
      instanceId: string,
    ) => Promise<Omit<AccountOutcome, "session" | "form">>,
    options: {
      perName?: boolean;
      /** The active factor the post removes, if it removes one (a check at least as strong is needed). */
      removes?: (body: Record<string, unknown>) => SignInFactor | undefined;
    } = {},
  ) {
    ui.post(`/login/account/otp${path}`, async (request: FastifyRequest, reply: FastifyReply) => {
      const post = await accountPost(kit, request, reply);
      if (!post) return reply;
      const { account, body } = post;
      const tooMany = options.perName
        ? await kit.limitPassword(request, reply, undefined, account.loginName)
        : await kit.limitPerIp(request, reply, undefined);
      if (tooMany) return reply;
      const instanceId = login.instanceId(request);
      const outcome = { session: account.id, form: "otp" as const };
      if (!(await maySignInChange(login, instanceId, account)))
        return redirectWithOutcome(kit, request, reply, {
          ...outcome,
          error: "accountOtp.secondFactorNeeded",
        });
      const removed = options.removes?.(body);
      if (
        removed &&
        account.factors?.includes(removed) &&
        !(await mayRemoveFactor(login, instanceId, account, removed))
      )
        return redirectWithOutcome(kit, request, reply, {
          ...outcome,
          error: "account.strongerFactorNeeded",
        });
      const commands = new UserFactorCommands({ masterKey: masterKeyOf(login) });
      const run = async (decide: Decide) => {
        await login.deps.eventStore.push({ instanceId, creator: account.userId }, async (tx) => {
          const user = foldUser(await tx.load(USER, account.userId));
          if (!user) throw new NotFoundError("user not found");
          return decide(commands, tx, instanceId, user);
        });
      };
      try {
        return redirectWithOutcome(kit, request, reply, {
          ...outcome,
          ...(await handle(run, body, account, instanceId)),
        });
      } catch (error) {
        if (error instanceof InvalidArgumentError)
          return redirectWithOutcome(kit, request, reply, {
            ...outcome,
            error: "error.formInvalid",
            fieldErrors: { code: "accountOtp.codeWrong" },
          });
        // enabled or removed meanwhile (another tab), or no verified address: the page shows what is now
        if (error instanceof AlreadyExistsError || error instanceof NotFoundError)
          return redirectWithOutcome(kit, request, reply, {
            ...outcome,
            error: "accountOtp.changedMeanwhile",
          });
        if (error instanceof FailedPreconditionError)
          return redirectWithOutcome(kit, request, reply, { ...outcome, error: "accountOtp.unavailable" });
        throw error;
      }
    });
  }

  route("/totp", async (run) => {
    await run(async (c, tx, instanceId, user) => (await c.registerTotp(tx, instanceId, user)).events);
    return { notice: "accountOtp.totpScan" };
  });
  // the verification is a TOTP check of the account's session too (so this session may change the factors
  // afterwards); a wrong code counts towards the lockout like any wrong code
  route(
    "/totp/verify",
    async (_run, body, account, instanceId) => {
      const code = field(body as Record<string, string>, "code");
      if (!code) return { error: "error.formInvalid", fieldErrors: { code: "field.required" } };
      const checked = await checkOnSession(login, instanceId, account, {
        factors: [totpEnrolmentCheck(masterKeyOf(login), code)],
      });
      if (checked.ok) return { notice: "accountOtp.totpActivated" };
      if (checked.error === "mfaOtp.codeWrong")
        return { error: "error.formInvalid", fieldErrors: { code: "accountOtp.codeWrong" } };
      return { error: checked.error === "mfaOtp.lockedOut" ? checked.error : "accountOtp.changedMeanwhile" };
    },
    { perName: true },
  );
  route(
    "/totp/remove",
    async (run) => {
      await run((c, tx, instanceId, user) => c.removeTotp(tx, instanceId, user));
      return { notice: "accountOtp.totpRemoved" };
    },
    // a pending registration is not among the active factors: cancelling it takes no stronger check
    { removes: () => "totp" },
  );
  for (const [path, type] of [
    ["/email", "otp_email"],
    ["/sms", "otp_sms"],
  ] as const) {
    const enabling = (body: Record<string, unknown>) =>
      field(body as Record<string, string>, "action") === "enable";
    route(
      path,
      async (run, body) => {
        const enable = enabling(body);
        await run((c, tx, instanceId, user) =>
          enable ? c.addOtp(tx, instanceId, user, type) : c.removeOtp(tx, instanceId, user, type),
        );
        const channel = type === "otp_email" ? "Email" : "Sms";
        return { notice: `accountOtp.${enable ? "enabled" : "disabled"}${channel}` };
      },
      { removes: (body) => (enabling(body) ? undefined : type) },
    );
  }
  route("/recovery", async (run) => {
    let codes: string[] = [];
    await run((c, _tx, instanceId, user) => {
      const made = c.recoveryCodes(instanceId, user);
      codes = made.codes;
      return made.events;
    });
    return { notice: "accountOtp.recoveryMade", values: { codes: codes.join(" ") } };
  });
  route(
    "/recovery/remove",
    async (run) => {
      await run((c, tx, instanceId, user) => c.removeRecoveryCodes(tx, instanceId, user));
      return { notice: "accountOtp.recoveryRemoved" };
    },
    { removes: () => "recovery_codes" },
  );
}
