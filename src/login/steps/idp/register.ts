/**
 * GET, POST /ui/login/idp/register?intent=…: the registration form prefilled with the provider's values
 * (`is_manual_creation_allowed`); its fields are read-only while auto creation is on, except one whose
 * value failed (e.g. a username taken). The user is created with its link and signed in.
 */
import type { FastifyInstance } from "fastify";
import { AlreadyExistsError } from "../../../errors.ts";
import type { UiState } from "../../auth-requests.ts";
import { createLinkedUser, type LinkedUser, valuesOf } from "../../idp/accounts.ts";
import { sendPage } from "../../render.ts";
import { type Body, field, type Query, type StepKit, stepUrl } from "../kit.ts";
import { registrationFields, validateRegistration } from "../register.ts";
import { back, failPage, intentOf, intentUrl, signIn } from "./kit.ts";

/** Its template, ../../templates/idp-register.eta, and the `ui_state.page` of its errors. */
export const PAGE = "idp-register";
const TEMPLATE = "steps/idp/register";

export function idpRegisterStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  ui.get<{ Querystring: Query }>("/login/idp/register", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const found = await intentOf(kit, request, reply, agent, request.query);
    if (!found) return reply;
    const { intent, authRequest, idp } = found;
    if (!idp.options.isManualCreationAllowed)
      return kit.sendMessage(request, reply, {
        status: 403,
        title: "register.title",
        message: "error.registrationDisabled",
        link: back(authRequest),
        authRequest,
      });
    const context = await kit.pageFor(request, agent, authRequest);
    const { t } = context.translator;
    const state: UiState =
      authRequest.uiState.page === PAGE ? authRequest.uiState : { values: valuesOf(intent.external!) };
    const readOnly = idp.options.isAutoCreation ? readOnlyFields(state.fieldErrors) : [];
    return sendPage(reply, context, TEMPLATE, {
      title: t("register.title"),
      intro: t("idp.registerIntro", { provider: idp.name, instance: context.instanceName }),
      error: state.error,
      intentId: intent.id,
      fields: registrationFields(kit, t, state, { withPassword: false, readOnly }),
      linkUrl: idp.options.isManualLinkingAllowed ? intentUrl("link", authRequest, intent) : undefined,
      cancelUrl: stepUrl("loginname", authRequest.id),
    });
  });

  ui.post("/login/idp/register", async (request, reply) => {
    const agent = await kit.checkForm(request, reply);
    if (!agent) return reply;
    const body = request.body as Body;
    const found = await intentOf(kit, request, reply, agent, {
      authRequest: field(body, "authRequest"),
      intent: field(body, "intent"),
    });
    if (!found) return reply;
    const { intent, authRequest, idp } = found;
    if (!idp.options.isManualCreationAllowed)
      return reply.redirect(intentUrl("register", authRequest, intent), 303);
    const external = intent.external!;
    const previous = authRequest.uiState.page === PAGE ? authRequest.uiState.fieldErrors : undefined;
    // read-only fields keep the provider's values whatever was posted
    const readOnly = idp.options.isAutoCreation ? readOnlyFields(previous) : [];
    const posted: Record<string, string> = {
      username: field(body, "username"),
      givenName: field(body, "givenName"),
      familyName: field(body, "familyName"),
      email: field(body, "email"),
    };
    const fromProvider = valuesOf(external) as Record<string, string>;
    const values = Object.fromEntries(
      Object.entries(posted).map(([name, value]) => [
        name,
        readOnly.includes(name) ? fromProvider[name] : value,
      ]),
    );
    const retry = async (fieldErrors: Record<string, string>) => {
      await login.authRequests.setUiState(authRequest, {
        page: PAGE,
        error: "error.formInvalid",
        values,
        fieldErrors,
      });
      return reply.redirect(intentUrl("register", authRequest, intent), 303);
    };
    const errors = validateRegistration(values);
    if (Object.keys(errors).length) return retry(errors);
    let user: LinkedUser;
    try {
      user = await createLinkedUser(login, request, authRequest, intent, idp, values);
    } catch (error) {
      if (error instanceof AlreadyExistsError) {
        if (error.message.includes("username")) return retry({ username: "field.usernameTaken" });
        return failPage(kit, request, reply, 409, "idp.alreadyLinked", authRequest);
      }
      throw error;
    }
    return signIn(kit, request, reply, authRequest, intent, user);
  });
}

/**
 * The fields the person may not change while auto creation is on: all the provider answered, except one
 * the provider's value failed for (e.g. a username taken), which the person must choose.
 */
function readOnlyFields(fieldErrors: Record<string, string> | undefined): string[] {
  return ["username", "givenName", "familyName", "email"].filter((name) => !fieldErrors?.[name]);
}
