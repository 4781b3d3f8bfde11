/**
 * POST /ui/login/account/links/remove: the signed-in person removes a link of its account to an external
 * identity provider (rate-limited per IP), with the domain function the users API's RemoveUserLink uses
 * (`removeIdpLinkEvents`) and the user as creator. Refused when it would leave the account without a way
 * to sign in: the user's only link while the user has no password (`keepSignIn`), and, as every change to
 * how the account signs in, from a session that did not pass the second factor of an account that has one
 * (`maySignInChange`).
 */
import type { FastifyInstance } from "fastify";
import { foldUser } from "../../../domain/user/aggregate.ts";
import { USER } from "../../../domain/user/events.ts";
import { LAST_SIGN_IN_METHOD, removeIdpLinkEvents } from "../../../domain/user/idp-links.ts";
import { FailedPreconditionError, NotFoundError } from "../../../errors.ts";
import { maySignInChange } from "../../sign-in-changes.ts";
import { field, type StepKit } from "../kit.ts";
import { accountPost, redirectWithOutcome } from "./kit.ts";

export function accountLinksStep(ui: FastifyInstance, kit: StepKit): void {
  const { eventStore } = kit.login.deps;
  ui.post("/login/account/links/remove", async (request, reply) => {
    const post = await accountPost(kit, request, reply);
    if (!post) return reply;
    const tooMany = await kit.limitPerIp(request, reply, undefined);
    if (tooMany) return reply;
    const { account, body } = post;
    const outcome = { session: account.id, form: "links" as const };
    const idpId = field(body, "idp");
    if (!(await maySignInChange(kit.login, kit.login.instanceId(request), account)))
      return redirectWithOutcome(kit, request, reply, { ...outcome, error: "accountOtp.secondFactorNeeded" });
    try {
      await eventStore.push(
        { instanceId: kit.login.instanceId(request), creator: account.userId },
        async (tx) => {
          const user = foldUser(await tx.load(USER, account.userId));
          if (!user) throw new NotFoundError("user not found");
          return removeIdpLinkEvents(user, idpId, { keepSignIn: true });
        },
      );
    } catch (error) {
      if (error instanceof FailedPreconditionError && error.message === LAST_SIGN_IN_METHOD)
        return redirectWithOutcome(kit, request, reply, { ...outcome, error: "account.linkLastSignIn" });
      // removed meanwhile (another tab, an administrator): nothing left to remove
      if (error instanceof NotFoundError)
        return redirectWithOutcome(kit, request, reply, { ...outcome, error: "account.linkUnknown" });
      throw error;
    }
    return redirectWithOutcome(kit, request, reply, { ...outcome, notice: "account.linkRemoved" });
  });
}
