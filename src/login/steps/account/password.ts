/**
 * POST /ui/login/account/password: the signed-in person changes its password, rate-limited like the
 * password page (per IP and per login name).
 *
 * The current password is checked as at sign-in (../../password.ts, on the account's session): a wrong
 * one counts toward the same lockout, and every failure (wrong, locked out, locked meanwhile) gets one
 * message. A right one counts as a fresh password check of the session. The new password must meet the
 * password policy (the one the users API's SetPassword enforces, shown on the form) and be confirmed; it
 * is set like SetPassword with `current_password` does (`setPasswordEvents`, no change required), with the
 * user as creator. As every password change, it ends the user's other sessions and their tokens in the same
 * transaction (src/domain/session/user-sessions.ts); this browser's session stays when "Stay signed in on
 * this browser" is checked (the form's default), else it ends too and the browser is sent to "signed out".
 */
import type { FastifyInstance } from "fastify";
import { hashPassword } from "../../../crypto/password.ts";
import { endSessionsOnPasswordChange } from "../../../domain/session/user-sessions.ts";
import { foldUser, setPasswordEvents } from "../../../domain/user/commands.ts";
import { USER } from "../../../domain/user/events.ts";
import { passwordPolicyGaps, passwordRequirements } from "../../../domain/user/password.ts";
import { NotFoundError } from "../../../errors.ts";
import type { Translator } from "../../i18n.ts";
import { SIGNED_OUT_URL } from "../../login.ts";
import { checkPasswordForSignIn } from "../../password.ts";
import { renderFragment } from "../../render.ts";
import { field, type StepKit } from "../kit.ts";
import { accountPost, redirectWithOutcome } from "./kit.ts";

const FIELDS = [
  { name: "currentPassword", label: "account.currentPassword", autocomplete: "current-password" },
  { name: "newPassword", label: "account.newPassword", autocomplete: "new-password" },
  { name: "newPasswordConfirm", label: "account.newPasswordConfirm", autocomplete: "new-password" },
] as const;

/** The form's fields with their errors and the policy under the new password. */
export function passwordFields(
  t: Translator["t"],
  minLength: number,
  state: { error?: string; fieldErrors: Record<string, string> },
) {
  const rules = passwordRequirements.map((rule) =>
    rule === "length" ? t("policy.length", { min: minLength }) : t(`policy.${rule}`),
  );
  const fields: Record<string, unknown>[] = FIELDS.map((f) => {
    const error = state.fieldErrors[f.name];
    const describedBy: string[] = [];
    if (error) describedBy.push(`${f.name}-error`);
    if (f.name === "newPassword") describedBy.push("password-policy");
    return {
      name: f.name,
      label: t(f.label),
      type: "password",
      autocomplete: f.autocomplete,
      error,
      describedBy,
      after: f.name === "newPassword" ? renderFragment("templates/policy", { rules, t }) : undefined,
    };
  });
  const focus = fields.find((f) => f.error);
  if (focus) focus.autofocus = true;
  return fields;
}

export function accountPasswordStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  const { config, eventStore } = login.deps;
  ui.post("/login/account/password", async (request, reply) => {
    const post = await accountPost(kit, request, reply);
    if (!post) return reply;
    const { agent, account, body } = post;
    const tooMany = await kit.limitPassword(request, reply, undefined, account.loginName);
    if (tooMany) return reply;

    const current = field(body, "currentPassword", { raw: true });
    const password = field(body, "newPassword", { raw: true });
    const confirm = field(body, "newPasswordConfirm", { raw: true });
    const fieldErrors: Record<string, string> = {};
    if (!current) fieldErrors.currentPassword = "field.required";
    if (!password) fieldErrors.newPassword = "field.required";
    else if (passwordPolicyGaps(password, config.passwordMinLength).length)
      fieldErrors.newPassword = "field.passwordPolicy";
    if (!confirm) fieldErrors.newPasswordConfirm = "field.required";
    else if (password && confirm !== password) fieldErrors.newPasswordConfirm = "field.passwordMismatch";
    const retry = (errors: Record<string, string>, error = "error.formInvalid") =>
      redirectWithOutcome(kit, request, reply, {
        session: account.id,
        form: "password",
        error,
        fieldErrors: errors,
      });
    if (Object.keys(fieldErrors).length) return retry(fieldErrors);

    const instanceId = login.instanceId(request);
    const checked = await checkPasswordForSignIn(login, {
      instanceId,
      user: { id: account.userId, orgId: account.orgId },
      password: current,
      sessionId: account.id,
      userAgentHash: agent.hash,
    });
    if (!checked) return retry({ currentPassword: "account.currentPasswordWrong" });

    const passwordHash = await hashPassword(password);
    const keep = field(body, "keepSession") === "true" ? account.id : undefined;
    await eventStore.push({ instanceId, creator: account.userId }, async (tx) => {
      const user = foldUser(await tx.load(USER, account.userId));
      if (!user) throw new NotFoundError("user not found");
      const events = setPasswordEvents(user, passwordHash, false);
      return [...events, ...(await endSessionsOnPasswordChange(tx, instanceId, events, keep))];
    });
    // signed out of this account here too ("signed out" names the browser's accounts that stay)
    if (!keep) return reply.redirect(SIGNED_OUT_URL, 303);
    return redirectWithOutcome(kit, request, reply, {
      session: account.id,
      form: "password",
      notice: "account.passwordChanged",
    });
  });
}
