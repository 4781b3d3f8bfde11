/**
 * The password change a sign-in asks for when the user's password was set with `change_required`
 * (`_set_password`, or created so): right after the password check of this auth request, before the
 * request completes (`pendingStep` in ../sessions.ts decides; the completion route enforces it).
 *
 *   GET  /ui/login/password-change?authRequest=<id>   new password and its confirmation, with the policy
 *   POST /ui/login/password-change                    sets it (change no longer required), then completes
 *
 * Only the person who proved the current password during this request gets here: a session signed in
 * earlier is sent to the password page first, so a browser left signed in cannot choose a new password.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { hashPassword, verifyPassword } from "../../crypto/password.ts";
import { endSessionsOnPasswordChange } from "../../domain/session/user-sessions.ts";
import { foldUser, setPasswordEvents } from "../../domain/user/commands.ts";
import { USER } from "../../domain/user/events.ts";
import { passwordPolicyGaps, passwordRequirements } from "../../domain/user/password.ts";
import { NotFoundError } from "../../errors.ts";
import type { AuthRequest, UiState } from "../auth-requests.ts";
import type { Translator } from "../i18n.ts";
import { initials, renderFragment, sendPage } from "../render.ts";
import { databaseNow, type LoginSession, pendingStep } from "../sessions.ts";
import { type Body, entryUrl, field, type Query, type StepKit, stepUrl } from "./kit.ts";

/** Its template, ../templates/password-change.eta, and the `ui_state.page` of its errors. */
const PAGE = "password-change";
const TEMPLATE = "steps/password-change";

export function passwordChangeStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  const { config, db, eventStore } = login.deps;

  /**
   * The session of the request when it is at the change now; otherwise the redirect to where it is (the
   * entry without a session, the password page before a fresh check, the completion without a change).
   */
  async function sessionToChange(
    request: FastifyRequest,
    reply: FastifyReply,
    authRequest: AuthRequest,
    status: 302 | 303,
  ): Promise<LoginSession | undefined> {
    const session = (await kit.sessionsFor(request, authRequest)).find((s) => s.id === authRequest.sessionId);
    if (!session) {
      await reply.redirect(entryUrl(authRequest.id), status);
      return undefined;
    }
    const pending = pendingStep(authRequest, session, await databaseNow(db));
    if (pending === PAGE) return session;
    await reply.redirect(stepUrl(pending ?? "complete", authRequest.id), status);
    return undefined;
  }

  function fields(t: Translator["t"], state: UiState) {
    const errors = state.fieldErrors ?? {};
    const rules = passwordRequirements.map((rule) =>
      rule === "length" ? t("policy.length", { min: config.passwordMinLength }) : t(`policy.${rule}`),
    );
    const make = (name: string, label: string, extra: Record<string, unknown> = {}) => {
      const error = errors[name] ? t(errors[name]) : undefined;
      const describedBy = [...((extra.describedBy as string[]) ?? [])];
      if (error) describedBy.unshift(`${name}-error`);
      return {
        name,
        label: t(label),
        type: "password",
        autocomplete: "new-password",
        error,
        ...extra,
        describedBy,
      };
    };
    const list: Record<string, unknown>[] = [
      make("password", "passwordChange.new", {
        describedBy: ["password-policy"],
        after: renderFragment("templates/policy", { rules, t }),
      }),
      make("passwordConfirm", "passwordChange.confirm"),
    ];
    (list.find((f) => f.error) ?? list[0]).autofocus = true;
    return list;
  }

  ui.get<{ Querystring: Query }>("/login/password-change", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const authRequest = await kit.loadRequest(request, reply, agent, request.query.authRequest);
    if (!authRequest) return reply;
    const session = await sessionToChange(request, reply, authRequest, 302);
    if (!session) return reply;
    const context = await kit.pageFor(request, agent, authRequest, session.orgId);
    const { t } = context.translator;
    const state = authRequest.uiState.page === PAGE ? authRequest.uiState : {};
    return sendPage(reply, context, TEMPLATE, {
      title: t("passwordChange.title"),
      account: {
        displayName: session.displayName,
        loginName: context.branding?.hideLoginNameSuffix ? session.username : session.loginName,
        initials: initials(session.displayName || session.loginName),
      },
      error: state.error,
      fields: fields(t, state),
      otherAccountUrl: stepUrl("loginname", authRequest.id),
    });
  });

  ui.post("/login/password-change", async (request, reply) => {
    const agent = await kit.checkForm(request, reply);
    if (!agent) return reply;
    const body = request.body as Body;
    const authRequest = await kit.loadRequest(request, reply, agent, field(body, "authRequest"));
    if (!authRequest) return reply;
    const session = await sessionToChange(request, reply, authRequest, 303);
    if (!session) return reply;
    const tooMany = await kit.limitPassword(request, reply, authRequest, session.loginName);
    if (tooMany) return reply;

    const password = field(body, "password", { raw: true });
    const confirm = field(body, "passwordConfirm", { raw: true });
    const errors: Record<string, string> = {};
    if (!password) errors.password = "field.required";
    else if (passwordPolicyGaps(password, config.passwordMinLength).length)
      errors.password = "field.passwordPolicy";
    if (!confirm) errors.passwordConfirm = "field.required";
    else if (password && confirm !== password) errors.passwordConfirm = "field.passwordMismatch";
    if (!errors.password) {
      // a required change means another password: the one just entered does not count as new
      const [row] = await db.query<{ password_hash: string | null }>(
        "SELECT password_hash FROM users WHERE instance_id = $1 AND id = $2",
        [authRequest.instanceId, session.userId],
      );
      if (row?.password_hash && (await verifyPassword(row.password_hash, password)))
        errors.password = "field.passwordSame";
    }
    if (Object.keys(errors).length) {
      await login.authRequests.setUiState(authRequest, {
        page: PAGE,
        error: "error.formInvalid",
        fieldErrors: errors,
      });
      return reply.redirect(stepUrl(PAGE, authRequest.id), 303);
    }

    const passwordHash = await hashPassword(password);
    await eventStore.push({ instanceId: authRequest.instanceId, creator: session.userId }, async (tx) => {
      const user = foldUser(await tx.load(USER, session.userId));
      if (!user) throw new NotFoundError("user not found");
      const events = setPasswordEvents(user, passwordHash, false);
      // the sign-in goes on with this session; the user's others end
      return [
        ...events,
        ...(await endSessionsOnPasswordChange(tx, authRequest.instanceId, events, session.id)),
      ];
    });
    await login.authRequests.setUiState(authRequest, {});
    return reply.redirect(stepUrl("complete", authRequest.id), 303);
  });
}
