/**
 * The second factors' lockout in the login UI over HTTP: wrong authenticator codes count on TOTP alone,
 * signing in again with the password does not reset them, from the maximum on even the right code is
 * refused with "Too many wrong attempts", and the lockout ends by itself.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { generate } from "otplib";
import {
  addHuman,
  alertOf,
  createAuthRequest,
  formOf,
  HttpBrowser,
  type LoginTestPlatform,
  startLoginPlatform,
} from "../../test/login.ts";
import { ACR_MFA } from "../domain/session/amr.ts";
import { foldUser } from "../domain/user/commands.ts";
import { USER } from "../domain/user/events.ts";
import { UserFactorCommands } from "../services/users/factor-commands.ts";

const PASSWORD = "Secret-Passw0rd!";
const MAX_ATTEMPTS = 3;
const LOCKOUT_SECONDS = 2;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const nowSeconds = () => Math.floor(Date.now() / 1000);
const freshStep = async () => {
  const left = 30 - (nowSeconds() % 30);
  if (left < 12) await sleep(left * 1000 + 200);
};

describe("login UI: a second factor's lockout", () => {
  let platform: LoginTestPlatform;
  let instanceId: string;

  before(async () => {
    platform = await startLoginPlatform({
      PLATFORM_MAX_PASSWORD_ATTEMPTS: String(MAX_ATTEMPTS),
      PLATFORM_PASSWORD_LOCKOUT_SECONDS: String(LOCKOUT_SECONDS),
      PLATFORM_PASSWORD_LOCKOUT_MAX_SECONDS: String(2 * LOCKOUT_SECONDS),
    });
    instanceId = platform.bootstrapResult!.instanceId;
  });
  after(() => platform.stop());

  /** A user with an active TOTP (its secret). */
  const withTotp = async (username: string) => {
    const id = await addHuman(platform, username, PASSWORD);
    const factors = new UserFactorCommands({ masterKey: platform.login.deps.masterKey! });
    let secret = "";
    await platform.eventStore.push({ instanceId, creator: "test" }, async (tx) => {
      const made = await factors.registerTotp(tx, instanceId, foldUser(await tx.load(USER, id))!);
      secret = made.secret;
      return made.events;
    });
    const code = await generate({ secret, epoch: nowSeconds() - 30 });
    await platform.eventStore.push({ instanceId, creator: "test" }, async (tx) =>
      factors.verifyTotp(tx, instanceId, foldUser(await tx.load(USER, id))!, code),
    );
    return secret;
  };
  /** A new browser signed in with the password for an auth request that needs a second factor. */
  async function afterPassword(loginName: string) {
    const browser = new HttpBrowser(platform.url);
    const authRequest = await createAuthRequest(platform, { acrValues: [ACR_MFA] });
    const loginPage = await browser.follow(`/ui/login?authRequest=${authRequest.id}`);
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName });
    const posted = await browser.post("/ui/login/password", {
      ...formOf(passwordPage.text, "/ui/login/password"),
      password: PASSWORD,
    });
    assert.equal(posted.status, 303, posted.text);
    assert.match(posted.location ?? "", /^\/ui\/login\/mfa(\/|\?)/);
    return { browser, authRequest, url: `/ui/login/mfa/totp?authRequest=${authRequest.id}` };
  }
  /** Posts a code on the TOTP page; answers the page shown after it. */
  const postCode = async (signIn: Awaited<ReturnType<typeof afterPassword>>, code: string) => {
    const page = await signIn.browser.get(signIn.url);
    const answer = await signIn.browser.post("/ui/login/mfa/totp", {
      ...formOf(page.text, "/ui/login/mfa/totp"),
      code,
    });
    assert.equal(answer.status, 303, answer.text.slice(0, 300));
    return answer;
  };

  it("wrong codes count on TOTP across sign-ins with the password; then even the right code is refused until the lockout ends", async () => {
    await freshStep();
    const secret = await withTotp("factor-lockout");
    const right = await generate({ secret });
    const wrong = right === "000000" ? "111111" : "000000";
    const first = await afterPassword("factor-lockout");
    for (let i = 1; i < MAX_ATTEMPTS; i++) await postCode(first, wrong);
    assert.equal(alertOf((await first.browser.get(first.url)).text), "The code is wrong or has expired.");
    // signing in again with the right password gives no new guesses
    const second = await afterPassword("factor-lockout");
    await postCode(second, wrong);
    const refused = await postCode(second, right);
    assert.equal(refused.location, second.url);
    assert.equal(
      alertOf((await second.browser.get(second.url)).text),
      "Too many wrong attempts. Try again later.",
    );
    assert.equal(platform.completer.completionOf(second.authRequest.id), undefined);
    // the lockout ends as the password's does
    await sleep(LOCKOUT_SECONDS * 1000 + 300);
    const passed = await postCode(second, right);
    assert.match(passed.location ?? "", /^http:\/\/app\.test\/callback\?code=/);
    assert.deepEqual(platform.completer.completionOf(second.authRequest.id)?.session.amr, [
      "pwd",
      "otp",
      "mfa",
    ]);
  });
});
