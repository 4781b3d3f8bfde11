/**
 * GET, POST /ui/login/register: registration ("Create an account", prompt=create) when the instance or the
 * requested organization allows it; rate-limited per IP. The new user joins the requested organization,
 * else the instance's default one, is signed in, and is sent a code for the e-mail address (VERIFY_EMAIL)
 * whose page (./verify-email.ts) comes next. The form's fields and checks serve the registration
 * after an identity provider too (./idp/register.ts).
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { hashPassword } from "../../crypto/password.ts";
import { holdOrg } from "../../domain/org/locks.ts";
import { createSession } from "../../domain/session/commands.ts";
import { addHumanEvent, foldUser } from "../../domain/user/commands.ts";
import { USER } from "../../domain/user/events.ts";
import { passwordPolicyGaps, passwordRequirements } from "../../domain/user/password.ts";
import { usernameProblem } from "../../domain/user/username.ts";
import { AlreadyExistsError } from "../../errors.ts";
import { newId } from "../../id.ts";
import type { AuthRequest, UiState } from "../auth-requests.ts";
import type { Translator } from "../i18n.ts";
import type { Login } from "../login.ts";
import { renderFragment, sendPage } from "../render.ts";
import { newUserAgent } from "../user-agent.ts";
import { codesOf } from "./code-kit.ts";
import { type Body, errorOn, field, type Query, type StepKit, stepUrl } from "./kit.ts";

/** Its template, ../templates/register.eta, and the `ui_state.page` of its errors. */
const PAGE = "register";
const TEMPLATE = "steps/register";

export function registerStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  const { config, eventStore } = login.deps;
  ui.get<{ Querystring: Query }>("/login/register", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    let authRequest: AuthRequest | undefined;
    if (request.query.authRequest) {
      authRequest = await kit.loadRequest(request, reply, agent, request.query.authRequest);
      if (!authRequest) return reply;
    }
    if (!(await login.allowRegister(login.instanceId(request), authRequest?.orgId))) {
      return kit.sendMessage(request, reply, {
        status: 403,
        title: "register.title",
        message: "error.registrationDisabled",
        authRequest,
        link: { url: stepUrl("loginname", authRequest?.id), text: "error.back" },
      });
    }
    const context = await kit.pageFor(request, agent, authRequest);
    const { t } = context.translator;
    const state = errorOn(authRequest, PAGE);
    return sendPage(reply, context, TEMPLATE, {
      title: t("register.title"),
      error: state.error,
      fields: registrationFields(kit, t, state),
      // back to the login-name page (the entry would show this form again with prompt=create)
      signInUrl: stepUrl("loginname", authRequest?.id),
    });
  });

  ui.post("/login/register", async (request, reply) => {
    const agent = await kit.checkForm(request, reply);
    if (!agent) return reply;
    const authRequest = await kit.requestOfForm(request, reply, agent);
    if (!authRequest) return reply;
    const instanceId = login.instanceId(request);
    if (!(await login.allowRegister(instanceId, authRequest.orgId)))
      return reply.redirect(stepUrl("register", authRequest.id), 303);
    const tooMany = await kit.limitPerIp(request, reply, authRequest);
    if (tooMany) return reply;

    const body = request.body as Body;
    const values = {
      username: field(body, "username"),
      givenName: field(body, "givenName"),
      familyName: field(body, "familyName"),
      email: field(body, "email"),
    };
    const password = field(body, "password", { raw: true });
    const confirm = field(body, "passwordConfirm", { raw: true });
    const errors = validateRegistration(values);
    if (!password) errors.password = "field.required";
    else if (passwordPolicyGaps(password, config.passwordMinLength).length)
      errors.password = "field.passwordPolicy";
    if (!confirm) errors.passwordConfirm = "field.required";
    else if (password && confirm !== password) errors.passwordConfirm = "field.passwordMismatch";

    const retry = async (fieldErrors: Record<string, string>) => {
      await login.authRequests.setUiState(authRequest, {
        page: PAGE,
        error: "error.formInvalid",
        values,
        fieldErrors,
      });
      return reply.redirect(stepUrl("register", authRequest.id), 303);
    };
    if (Object.keys(errors).length) return retry(errors);

    const orgId = await registrationOrg(login, request, authRequest);
    const userId = newId();
    const lang = (await login.translatorFor(request, authRequest)).lang;
    const event = addHumanEvent(userId, orgId, {
      username: values.username,
      profile: {
        given_name: values.givenName,
        family_name: values.familyName,
        display_name: `${values.givenName} ${values.familyName}`,
        preferred_language: lang,
      },
      email: { address: values.email, is_verified: false },
      password_hash: await hashPassword(password),
      password_change_required: false,
    });
    const actor = { instanceId, creator: userId };
    try {
      await eventStore.push(actor, async (tx) => {
        await holdOrg(tx, instanceId, orgId);
        return [event];
      });
    } catch (error) {
      if (error instanceof AlreadyExistsError) return retry({ username: "field.usernameTaken" });
      throw error;
    }
    const fresh = newUserAgent();
    const created = await createSession(
      eventStore,
      actor,
      { user: { id: userId, orgId }, password, userAgentHash: fresh.hash },
      login.policy,
    );
    // signed in: the browser gets a new cookie (no session fixation)
    await login.adoptUserAgent(request, reply, fresh, authRequest);
    await login.authRequests.attachSession(authRequest, created.sessionId);
    // the address is unverified: its code goes out as when the users API sets an unverified address
    const notice = await sendRegistrationCode(login, instanceId, userId, values.email, authRequest);
    await login.authRequests.setUiState(authRequest, { page: "verify-email", values: { notice } });
    return reply.redirect(stepUrl("verify-email", authRequest.id), 303);
  });
}

/**
 * The new user's VERIFY_EMAIL code, through the users API's path for an address set unverified
 * (`codesForUnverified`: a code when an SMTP provider is active, queued in the transaction of its event).
 * "sent", or "off" when no provider is active (nothing could be sent). Also after a registration through
 * an identity provider that did not assert the address verified (./idp/kit.ts).
 */
export async function sendRegistrationCode(
  login: Login,
  instanceId: string,
  userId: string,
  email: string,
  authRequest?: AuthRequest,
): Promise<"sent" | "off"> {
  const codes = codesOf(login, await login.messageLabelOrg(authRequest));
  let sent = false;
  await login.deps.eventStore.push({ instanceId, creator: userId }, async (tx) => {
    const user = foldUser(await tx.load(USER, userId));
    if (!user) return [];
    const events = await codes.codesForUnverified(tx, instanceId, user, { email });
    sent = events.length > 0;
    return events;
  });
  return sent ? "sent" : "off";
}

/** The organization new users join: the requested one, else the instance's default. */
async function registrationOrg(login: Login, request: FastifyRequest, authRequest?: AuthRequest) {
  return authRequest?.orgId ?? (await login.instance(request)).defaultOrgId;
}

/** The registration values' errors (field → message key): required, no spaces, lengths, e-mail. */
export function validateRegistration(values: Record<string, string>): Record<string, string> {
  const errors: Record<string, string> = {};
  for (const [name, value] of Object.entries(values)) if (!value) errors[name] = "field.required";
  const usernameIssue = values.username ? usernameProblem(values.username) : undefined;
  if (usernameIssue === "whitespace") errors.username = "field.usernameSpaces";
  else if (usernameIssue === "too_long") errors.username = "field.tooLong";
  else if (usernameIssue) errors.username = "field.usernameInvalid";
  for (const name of ["username", "givenName", "familyName"] as const)
    if (values[name].length > 200) errors[name] = "field.tooLong";
  if (values.email && !/^[\w.!#$%&'*+/=?^{|}~-]+@[\w.-]+$/u.test(values.email))
    errors.email = "field.emailInvalid";
  if (values.email.length > 320) errors.email = "field.emailInvalid";
  return errors;
}

/** The form's fields (labels, autocomplete, values, errors, which one has the focus) for `state`. */
export function registrationFields(
  kit: StepKit,
  t: Translator["t"],
  state: UiState,
  options: { withPassword: boolean; readOnly: string[] } = { withPassword: true, readOnly: [] },
) {
  const values = state.values ?? {};
  const errors = state.fieldErrors ?? {};
  const minLength = kit.login.deps.config.passwordMinLength;
  const policy = renderHtmlPolicy(t, minLength);
  const make = (
    name: string,
    label: string,
    type: string,
    autocomplete: string,
    extra: Record<string, unknown> = {},
  ) => {
    const error = errors[name] ? t(errors[name], { max: 200 }) : undefined;
    const describedBy = [...((extra.describedBy as string[]) ?? [])];
    if (error) describedBy.unshift(`${name}-error`);
    return {
      name,
      label: t(label),
      type,
      autocomplete,
      value: type === "password" ? undefined : (values[name] ?? ""),
      error,
      readOnly: options.readOnly.includes(name),
      ...extra,
      describedBy,
    };
  };
  const fields = [
    make("username", "register.username", "text", "username", {
      autocapitalize: "none",
      maxLength: 200,
    }),
    make("givenName", "register.givenName", "text", "given-name", { maxLength: 200 }),
    make("familyName", "register.familyName", "text", "family-name", { maxLength: 200 }),
    make("email", "register.email", "email", "email", { maxLength: 320 }),
    ...(options.withPassword
      ? [
          make("password", "register.password", "password", "new-password", {
            describedBy: ["password-policy"],
            after: policy,
          }),
          make("passwordConfirm", "register.passwordConfirm", "password", "new-password"),
        ]
      : []),
  ];
  const firstInvalid = fields.find((f) => f.error);
  const firstEditable = fields.find((f) => !f.readOnly);
  const focus = firstInvalid ?? firstEditable;
  if (focus) (focus as Record<string, unknown>).autofocus = true;
  return fields;
}

/** The password policy's rules under the password field. */
function renderHtmlPolicy(t: Translator["t"], minLength: number): string {
  const rules = passwordRequirements.map((rule) =>
    rule === "length" ? t("policy.length", { min: minLength }) : t(`policy.${rule}`),
  );
  return renderFragment("templates/policy", { rules, t });
}
