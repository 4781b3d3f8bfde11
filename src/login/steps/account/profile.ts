/**
 * POST /ui/login/account/profile: the signed-in person's profile (given name, family name, display name,
 * nickname, preferred language), rate-limited per IP. The rules are the users API's: each value is checked
 * against PatchUser's declared field rules (proto/platform/resources/user/v3alpha/user_service.proto,
 * `PatchHumanProfile`), and the change is decided by the same domain functions as PatchUser
 * (`profileChange`, `changeUserEvents`), appended with the user as creator. Any invalid value stores
 * nothing; the form shows each field's error with the values typed.
 *
 * E-mail address and phone number have forms of their own (./contact.ts): a new address is unverified
 * and gets its verification code.
 */
import { create } from "@bufbuild/protobuf";
import type { FastifyInstance } from "fastify";
import { rejectNul, validate } from "../../../api/validate.ts";
import { changeUserEvents, foldUser, requireHuman } from "../../../domain/user/commands.ts";
import { USER } from "../../../domain/user/events.ts";
import { type ProfilePatch, profileChange } from "../../../domain/user/profile.ts";
import { InvalidArgumentError, NotFoundError } from "../../../errors.ts";
import { PatchHumanProfileSchema } from "../../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import type { Translator } from "../../i18n.ts";
import { field, type StepKit } from "../kit.ts";
import type { AccountUser } from "./index.ts";
import { accountPost, redirectWithOutcome } from "./kit.ts";

/** The longest value PatchHumanProfile allows (shown in the "too long" message and as maxlength). */
export const PROFILE_LIMITS = { maxLength: 200 };

/** The form's text fields: name → PatchHumanProfile member, label, autocomplete, required. */
const TEXT_FIELDS = [
  { name: "givenName", label: "account.givenName", autocomplete: "given-name", required: true },
  { name: "familyName", label: "account.familyName", autocomplete: "family-name", required: true },
  { name: "displayName", label: "account.displayName", autocomplete: "name", required: false },
  { name: "nickName", label: "account.nickName", autocomplete: "nickname", required: false },
] as const;

type ProfileValues = Record<(typeof TEXT_FIELDS)[number]["name"] | "preferredLanguage", string>;

/**
 * The error key of one value under PatchUser's rules (and the form's: required names, a language the
 * instance allows).
 */
function problemOf(
  name: keyof ProfileValues,
  value: string,
  allowedLanguages: readonly string[],
): string | undefined {
  if (name === "preferredLanguage")
    return value === "" || allowedLanguages.includes(value) ? undefined : "field.invalid";
  const required = TEXT_FIELDS.find((f) => f.name === name)?.required;
  if (required && value === "") return "field.required";
  const patch = create(PatchHumanProfileSchema, { [name]: value });
  try {
    rejectNul(PatchHumanProfileSchema, patch);
    validate(PatchHumanProfileSchema, patch);
  } catch (error) {
    if (!(error instanceof InvalidArgumentError)) throw error;
    return [...value].length > PROFILE_LIMITS.maxLength ? "field.tooLong" : "field.invalid";
  }
  return undefined;
}

/** The form's fields for the page: the user's values, or those typed with their errors. */
export function profileFields(
  t: Translator["t"],
  user: AccountUser,
  state: { fieldErrors: Record<string, string>; values: Record<string, string> },
) {
  const typed = Object.keys(state.values).length > 0;
  const shownValue = (name: keyof ProfileValues) =>
    typed ? String(state.values[name] ?? "") : String(user[name] ?? "");
  const fields: Record<string, unknown>[] = TEXT_FIELDS.map((f) => {
    const error = state.fieldErrors[f.name];
    return {
      name: f.name,
      label: t(f.label),
      type: "text",
      autocomplete: f.autocomplete,
      value: shownValue(f.name),
      maxLength: PROFILE_LIMITS.maxLength,
      optional: !f.required,
      error,
      describedBy: error ? [`${f.name}-error`] : [],
    };
  });
  const languageError = state.fieldErrors.preferredLanguage;
  const language: Record<string, unknown> = {
    name: "preferredLanguage",
    label: t("account.preferredLanguage"),
    value: shownValue("preferredLanguage"),
    error: languageError,
    describedBy: languageError ? ["preferredLanguage-error"] : [],
  };
  const focus = [...fields, language].find((f) => f.error);
  if (focus) focus.autofocus = true;
  return { text: fields, language };
}

export function accountProfileStep(ui: FastifyInstance, kit: StepKit): void {
  const { eventStore } = kit.login.deps;
  ui.post("/login/account/profile", async (request, reply) => {
    const post = await accountPost(kit, request, reply);
    if (!post) return reply;
    const tooMany = await kit.limitPerIp(request, reply, undefined);
    if (tooMany) return reply;
    const { account, body } = post;

    const values = Object.fromEntries(
      [...TEXT_FIELDS.map((f) => f.name), "preferredLanguage" as const].map((name) => [
        name,
        field(body, name).slice(0, PROFILE_LIMITS.maxLength + 1),
      ]),
    ) as ProfileValues;
    const fieldErrors: Record<string, string> = {};
    const allowedLanguages = await kit.login.allowedLanguages(request);
    for (const [name, value] of Object.entries(values)) {
      const problem = problemOf(name as keyof ProfileValues, value, allowedLanguages);
      if (problem) fieldErrors[name] = problem;
    }
    if (Object.keys(fieldErrors).length)
      return redirectWithOutcome(kit, request, reply, {
        session: account.id,
        form: "profile",
        error: "error.formInvalid",
        fieldErrors,
        values,
      });

    const patch: ProfilePatch = { ...values };
    const instanceId = kit.login.instanceId(request);
    await eventStore.push({ instanceId, creator: account.userId }, async (tx) => {
      const user = foldUser(await tx.load(USER, account.userId));
      if (!user) throw new NotFoundError("user not found");
      requireHuman(user, "profiles");
      return changeUserEvents(user, profileChange(patch));
    });
    return redirectWithOutcome(kit, request, reply, {
      session: account.id,
      form: "profile",
      notice: "account.profileSaved",
    });
  });
}
