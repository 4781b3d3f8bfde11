/**
 * The account page's passkeys and security keys: the list (names, kind, last use), "Add a passkey" and
 * "Add a security key" (GET /ui/login/account/passkeys/new, the registration page; POST
 * /ui/login/account/passkeys/verify) and removal (POST /ui/login/account/passkeys/remove), each post
 * rate-limited per IP and answering 303 to the account page. Adding and removing follow the rule of every
 * change to how an account signs in (../../sign-in-changes.ts): a session that did not pass the second
 * factor of an account that has one adds no key (the page and its post both refuse), and a key is removed
 * only by a session that verified a factor at least as strong (a passkey by one that verified the user).
 */
import type { FastifyInstance } from "fastify";
import { removePasskeyEvent } from "../../../domain/user/factors/passkeys.ts";
import { NotFoundError } from "../../../errors.ts";
import { userFactors } from "../../../query/user-factors.ts";
import type { Translator } from "../../i18n.ts";
import type { Login } from "../../login.ts";
import { mayRemoveFactor, maySignInChange } from "../../sign-in-changes.ts";
import { onSignedInUser } from "../../webauthn.ts";
import { accountView, field, type Query, type StepKit } from "../kit.ts";
import { finishRegistration, sendRegistrationPage } from "../passkey/register.ts";
import { accountPost, accountUrl, redirectWithOutcome } from "./kit.ts";

/** The section's list: the user's active passkeys and security keys, oldest first. */
export async function accountPasskeys(
  login: Login,
  instanceId: string,
  userId: string,
  translator: Translator,
) {
  const { t, dateTime } = translator;
  const factors = await userFactors(login.deps.db, instanceId, userId, {
    active: true,
    types: ["passkey", "u2f"],
  });
  return factors.map((f) => ({
    id: f.id,
    name: f.name,
    kind: t(f.type === "u2f" ? "account.passkeyTypeU2f" : "account.passkeyTypePasskey"),
    lastUsed: f.lastUsedAt ? t("account.passkeyLastUsed", { time: dateTime(f.lastUsedAt) }) : undefined,
  }));
}

export function accountPasskeysStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;

  ui.get<{ Querystring: Query }>("/login/account/passkeys/new", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const account = (await login.accountSessionsOfUserAgent(request)).find(
      (s) => s.id === request.query.session,
    );
    if (!account)
      return kit.sendMessage(request, reply, {
        status: 403,
        title: "account.title",
        message: "account.sessionEnded",
        link: { url: "/ui/login/loginname", text: "signedout.signIn" },
      });
    // no registration is started for a session that may not add a key: back to the page, which says why
    if (!(await maySignInChange(login, login.instanceId(request), account)))
      return redirectWithOutcome(kit, request, reply, {
        session: account.id,
        form: "passkeys",
        error: "accountOtp.secondFactorNeeded",
      });
    const context = await kit.pageFor(request, agent, undefined, account.orgId);
    return sendRegistrationPage(kit, request, reply, context, {
      type: request.query.type === "u2f" ? "u2f" : "passkey",
      userId: account.userId,
      action: "/ui/login/account/passkeys/verify",
      account: accountView(account, context.branding?.hideLoginNameSuffix),
      session: account.id,
      cancelUrl: accountUrl(account.id),
    });
  });

  ui.post("/login/account/passkeys/verify", async (request, reply) => {
    const post = await accountPost(kit, request, reply);
    if (!post) return reply;
    const tooMany = await kit.limitPerIp(request, reply, undefined);
    if (tooMany) return reply;
    const { account, body } = post;
    if (!(await maySignInChange(login, login.instanceId(request), account)))
      return redirectWithOutcome(kit, request, reply, {
        session: account.id,
        form: "passkeys",
        error: "accountOtp.secondFactorNeeded",
      });
    const outcome = await finishRegistration(kit, request, account.userId, body);
    return redirectWithOutcome(kit, request, reply, {
      session: account.id,
      form: "passkeys",
      ...(outcome.error ? { error: outcome.error } : { notice: "account.passkeyAdded" }),
    });
  });

  ui.post("/login/account/passkeys/remove", async (request, reply) => {
    const post = await accountPost(kit, request, reply);
    if (!post) return reply;
    const tooMany = await kit.limitPerIp(request, reply, undefined);
    if (tooMany) return reply;
    const { account, body } = post;
    const outcome = { session: account.id, form: "passkeys" as const };
    const instanceId = login.instanceId(request);
    const [key] = (
      await userFactors(login.deps.db, instanceId, account.userId, {
        active: true,
        types: ["passkey", "u2f"],
      })
    ).filter((f) => f.id === field(body, "passkey"));
    if (key && !(await mayRemoveFactor(login, instanceId, account, key.type)))
      return redirectWithOutcome(kit, request, reply, { ...outcome, error: "account.strongerFactorNeeded" });
    try {
      await onSignedInUser(login, request, account.userId, async (user, tx) => [
        await removePasskeyEvent(tx, login.instanceId(request), user, field(body, "passkey")),
      ]);
    } catch (error) {
      // removed meanwhile (another tab, an administrator)
      if (error instanceof NotFoundError)
        return redirectWithOutcome(kit, request, reply, { ...outcome, error: "account.passkeyUnknown" });
      throw error;
    }
    return redirectWithOutcome(kit, request, reply, { ...outcome, notice: "account.passkeyRemoved" });
  });
}
