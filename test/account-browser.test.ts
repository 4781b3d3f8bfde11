/**
 * The account page's forms in Debian's Chromium (playwright-core): each form's success and failure as a
 * person meets them (the e-mail change's code arrives at a real SMTP server), what they store (read back
 * through the users API; the custom data of a user schema too), the refusals (no CSRF token, another browser's account), and axe-core on every
 * state in light and dark mode. The HTTP-level details are in src/login/account.test.ts.
 *
 * Needs Chromium (`apt-get install -y chromium`, or CHROMIUM_PATH).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { foldUser } from "../src/domain/user/commands.ts";
import { USER } from "../src/domain/user/events.ts";
import { addIdpLinkEvents } from "../src/domain/user/idp-links.ts";
import { giveMemberData, MEMBER_DATA } from "./account-data.ts";
import { addMachineUser, eventCount, restClient } from "./helpers.ts";
import { addHuman, type LoginTestPlatform, startLoginPlatform } from "./login.ts";
import { axeViolations, launchChromium, PASSWORD, watchProblems } from "./login-browser.ts";
import { type SmtpReceiver, startSmtpReceiver } from "./smtp-receiver.ts";
import { testTime } from "./time.ts";

const USERS = "/resources/v3alpha/users";

let platform: LoginTestPlatform;
let browser: Browser;
let owner: string;
let smtp: SmtpReceiver;
const rest = restClient(
  () => platform,
  () => owner,
);

before(async () => {
  [platform, browser] = await Promise.all([startLoginPlatform(), launchChromium()]);
  ({ token: owner } = await addMachineUser(platform, {
    username: "owner",
    membership: { contextType: "instance", roles: ["IAM_OWNER"] },
  }));
  smtp = await startSmtpReceiver({});
  const mail = await rest("POST", "/resources/v3alpha/smtp_providers", {
    json: { description: "mail", sender_address: "noreply@example.com", host: `127.0.0.1:${smtp.port}` },
  });
  assert.equal(mail.status, 201, mail.text);
  const activated = await rest("POST", `/resources/v3alpha/smtp_providers/${mail.json.details.id}/_activate`);
  assert.equal(activated.status, 200, activated.text);
});

after(async () => {
  await browser?.close();
  await platform?.stop();
  await smtp?.close();
});

async function signedInPage(loginName: string) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const problems = watchProblems(page);
  await page.goto(`${platform.url}/`);
  await page.getByLabel("Login name").fill(loginName);
  await page.getByRole("button", { name: "Next" }).click();
  await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(`${platform.url}/`);
  return { context, page, problems };
}

/** axe-core in both colour schemes; answers the violations. */
async function axe(page: Page, name: string): Promise<string[]> {
  const failures: string[] = [];
  for (const colorScheme of ["dark", "light"] as const) {
    await page.emulateMedia({ colorScheme });
    for (const v of await axeViolations(page))
      failures.push(`${name} (${colorScheme}): ${v.id} [${v.impact}] ${v.help} — ${v.targets.join(", ")}`);
  }
  return failures;
}

const userOf = async (id: string) => (await rest("GET", `${USERS}/${id}`)).json.user;

describe("account page in Chromium", () => {
  it("edits the profile: errors on the form store nothing, a valid one is saved", async () => {
    const id = await addHuman(platform, "olga", PASSWORD, { givenName: "Olga", familyName: "Berg" });
    const { context, page, problems } = await signedInPage("olga");
    const failures = await axe(page, "account");

    const before = await eventCount(platform);
    await page.getByLabel("First name").fill("");
    await page.getByLabel("Nickname (optional)").fill("Olly");
    await page.getByRole("button", { name: "Save profile" }).click();
    await page.locator("#profile-error").waitFor();
    assert.equal(await eventCount(platform), before, "nothing stored");
    const given = page.getByLabel("First name");
    assert.equal(await given.getAttribute("aria-invalid"), "true");
    assert.equal(await given.getAttribute("aria-describedby"), "givenName-error");
    assert.equal(await page.locator("#givenName-error").textContent(), "This field is required.");
    assert.equal(await page.getByLabel("Nickname (optional)").inputValue(), "Olly", "typed values kept");
    assert.ok(
      await given.evaluate((el) => el === el.ownerDocument.activeElement),
      "the invalid field has the focus",
    );
    failures.push(...(await axe(page, "profile errors")));
    assert.equal((await userOf(id)).human.profile.nick_name ?? "", "");

    await given.fill("Olivia");
    await page.getByLabel("Preferred language").selectOption("de");
    await page.getByRole("button", { name: "Save profile" }).click();
    await page.locator(".notice").waitFor();
    assert.equal(await page.locator(".notice").textContent(), "Your profile was saved.");
    failures.push(...(await axe(page, "profile saved")));
    const profile = (await userOf(id)).human.profile;
    assert.deepEqual(
      [profile.given_name, profile.nick_name, profile.preferred_language],
      ["Olivia", "Olly", "de"],
    );
    assert.deepEqual(failures, []);
    assert.deepEqual(problems, []);
    await context.close();
  });

  it("edits the custom data of the user's schema: a field error stores nothing, a valid form is saved", async () => {
    const id = await addHuman(platform, "mara", PASSWORD, { givenName: "Mara", familyName: "Weber" });
    await giveMemberData(platform, id);
    const { context, page, problems } = await signedInPage("mara");
    const section = page.getByRole("region", { name: "Additional information" });
    await section.waitFor();
    const failures = await axe(page, "account with custom data");
    assert.equal(await section.getByText("M-1042").count(), 1, "read-only property shown as text");
    assert.equal(await page.getByText("prefers phone calls").count(), 0, "hidden property not shown");
    assert.equal(await section.getByRole("group", { name: "Postal address" }).count(), 1);

    const before = await eventCount(platform);
    await section.getByLabel("Membership").selectOption({ label: "premium" });
    await section.getByLabel("Monthly newsletter").check();
    await section.getByLabel("Year of birth").fill("1800");
    await section.getByLabel("City").fill("");
    await page.getByRole("button", { name: "Save information" }).click();
    await page.locator("#data-error").waitFor();
    assert.equal(await eventCount(platform), before, "nothing stored");
    const year = page.getByLabel("Year of birth");
    assert.equal(await year.getAttribute("aria-invalid"), "true");
    const describedBy = (await year.getAttribute("aria-describedby")) ?? "";
    assert.equal(await page.locator(`#${describedBy}`).textContent(), "This value is not valid.");
    assert.ok(
      await year.evaluate((el) => el === el.ownerDocument.activeElement),
      "the invalid field has the focus",
    );
    assert.ok(await page.getByLabel("Monthly newsletter").isChecked(), "typed values kept");
    failures.push(...(await axe(page, "custom data errors")));

    await year.fill("1985");
    await page.getByRole("button", { name: "Save information" }).click();
    await page.locator(".notice").waitFor();
    assert.equal(await page.locator(".notice").textContent(), "Your information was saved.");
    failures.push(...(await axe(page, "custom data saved")));
    assert.deepEqual((await userOf(id)).data, {
      ...MEMBER_DATA,
      membership: "premium",
      newsletter: true,
      birth_year: 1985,
      address: { street: "Seestrasse 12", zip: "8002" },
    });
    assert.deepEqual(failures, []);
    assert.deepEqual(problems, []);
    await context.close();
  });

  it("changes the e-mail address and verifies it with the mailed code; a wrong code is a field error", async () => {
    const id = await addHuman(platform, "odile", PASSWORD, { givenName: "Odile", familyName: "Roy" });
    const { context, page, problems } = await signedInPage("odile");
    assert.equal(await page.locator("#email-status").textContent(), "Current: odile@example.com (verified)");
    const address = page.getByLabel("E-mail address");
    assert.equal(await address.getAttribute("aria-describedby"), "email-status");

    await address.fill("odile@");
    await page.getByRole("button", { name: "Change e-mail address" }).click();
    await page.locator("#email-form-error").waitFor();
    assert.equal(await address.getAttribute("aria-invalid"), "true");
    assert.equal(await address.getAttribute("aria-describedby"), "email-error email-status");
    assert.ok(
      await address.evaluate((el) => el === el.ownerDocument.activeElement),
      "the invalid field has the focus",
    );
    const failures = await axe(page, "e-mail error");

    // the change needs the current password
    await address.fill("odile@new.example");
    await page.getByRole("button", { name: "Change e-mail address" }).click();
    await page.locator("#emailPassword-error").waitFor();
    assert.equal(await page.locator("#emailPassword-error").textContent(), "This field is required.");
    assert.equal(
      await page.locator("#emailPassword").getAttribute("aria-describedby"),
      "emailPassword-error emailPassword-help",
    );
    failures.push(...(await axe(page, "e-mail change without the password")));
    assert.equal((await userOf(id)).human.email.address, "odile@example.com");
    await page.locator("#emailPassword").fill(PASSWORD);
    await page.getByRole("button", { name: "Change e-mail address" }).click();
    await page.locator("#email-title ~ .notice").waitFor();
    assert.match((await page.locator(".notice").textContent()) ?? "", /We sent a code to the new address/);
    assert.equal(
      await page.locator("#email-status").textContent(),
      "Current: odile@new.example (not verified)",
    );
    failures.push(...(await axe(page, "e-mail unverified, with its code form")));
    let mail: (typeof smtp.received)[number] | undefined;
    for (let i = 0; i < testTime(400) && !mail; i++) {
      mail = smtp.received.find((m) => m.envelope.to.includes("odile@new.example"));
      if (!mail) await new Promise((r) => setTimeout(r, 25));
    }
    const code = /[?&]code=([A-Z2-9]{8})/.exec(mail?.mail.text ?? "")?.[1];
    assert.ok(code, "a code mailed to the new address");
    let notice: (typeof smtp.received)[number] | undefined;
    for (let i = 0; i < testTime(400) && !notice; i++) {
      notice = smtp.received.find(
        (m) =>
          m.envelope.to.includes("odile@example.com") && /address .* was changed/.test(m.mail.subject ?? ""),
      );
      if (!notice) await new Promise((r) => setTimeout(r, 25));
    }
    assert.ok(notice, "the previous address is told of the change");

    const codeField = page.getByLabel("Code", { exact: true });
    await codeField.fill("WRONG234");
    await page.getByRole("button", { name: "Verify e-mail address" }).click();
    await page.locator("#emailCode-error").waitFor();
    assert.match((await page.locator("#emailCode-error").textContent()) ?? "", /wrong or has expired/);
    assert.equal(
      await page.getByLabel("Code", { exact: true }).getAttribute("aria-describedby"),
      "emailCode-error emailCode-help",
    );
    failures.push(...(await axe(page, "wrong code")));
    assert.equal((await userOf(id)).human.email.is_verified ?? false, false);

    await page.getByLabel("Code", { exact: true }).fill(code);
    await page.getByRole("button", { name: "Verify e-mail address" }).click();
    await page.locator("#email-title ~ .notice").waitFor();
    assert.equal(await page.locator(".notice").textContent(), "Your e-mail address is verified.");
    assert.equal(await page.locator("#email-status").textContent(), "Current: odile@new.example (verified)");
    assert.equal(await page.getByLabel("Code", { exact: true }).count(), 0, "no code form once verified");
    failures.push(...(await axe(page, "e-mail verified")));
    const email = (await userOf(id)).human.email;
    assert.deepEqual([email.address, email.is_verified], ["odile@new.example", true]);

    // a phone number without an SMS provider: saved, and the page says no code could be sent
    await page.getByLabel("Phone number (optional)").fill("+41 79 555 12 34");
    await page.locator("#phonePassword").fill(PASSWORD);
    await page.getByRole("button", { name: "Save phone number" }).click();
    await page.locator("#phone-form-error").waitFor();
    assert.match(
      (await page.locator("#phone-form-error").textContent()) ?? "",
      /sending text messages is not set up/,
    );
    assert.equal(
      await page.locator("#phone-status").textContent(),
      "Current: +41 79 555 12 34 (not verified)",
    );
    failures.push(...(await axe(page, "phone unverified, with its code and remove forms")));
    await page.locator("#phonePassword").fill(PASSWORD);
    await page.getByRole("button", { name: "Remove phone number" }).click();
    await page.locator("#phone-title ~ .notice").waitFor();
    assert.equal(await page.locator(".notice").textContent(), "Your phone number was removed.");
    assert.equal((await userOf(id)).human.phone, undefined);
    assert.deepEqual(failures, []);
    assert.deepEqual(problems, []);
    await context.close();
  });

  it("changes the password only with the right current one", async () => {
    await addHuman(platform, "oskar", PASSWORD);
    const { context, page } = await signedInPage("oskar");
    assert.match((await page.locator("#password-policy").textContent()) ?? "", /at least 8 characters/);
    const change = async (current: string, next: string) => {
      await page.locator("#currentPassword").fill(current);
      await page.getByLabel("New password", { exact: true }).fill(next);
      await page.getByLabel("Confirm new password").fill(next);
      await page.getByRole("button", { name: "Change password" }).click();
      await page.locator("#password-error, #password-title ~ .notice").first().waitFor();
    };
    await change("Wrong-Passw0rd!", "Renewed-Passw0rd!");
    assert.match(
      (await page.locator("#currentPassword-error").textContent()) ?? "",
      /current password is wrong/,
    );
    assert.equal(
      await page.locator("#currentPassword").getAttribute("aria-describedby"),
      "currentPassword-error",
    );
    assert.deepEqual(await axe(page, "password error"), []);
    assert.equal(await page.getByLabel("Stay signed in on this browser").isChecked(), true);
    await change(PASSWORD, "Renewed-Passw0rd!");
    assert.equal(
      await page.locator(".notice").textContent(),
      "Your password was changed. You were signed out on every other browser and device.",
    );
    await context.close();

    // the new password signs in
    const again = await browser.newContext();
    const next = await again.newPage();
    await next.goto(`${platform.url}/`);
    await next.getByLabel("Login name").fill("oskar");
    await next.getByRole("button", { name: "Next" }).click();
    await next.getByLabel("Password", { exact: true }).fill("Renewed-Passw0rd!");
    await next.getByRole("button", { name: "Sign in" }).click();
    await next.waitForURL(`${platform.url}/`);
    assert.equal((await next.locator("h1").textContent())?.trim(), "Your account");
    await again.close();
  });

  it("removes a link to an identity provider", async () => {
    const id = await addHuman(platform, "otto", PASSWORD);
    await platform.eventStore.push(
      { instanceId: platform.bootstrapResult!.instanceId, creator: "test" },
      async (tx) =>
        addIdpLinkEvents(foldUser(await tx.load(USER, id))!, {
          idp_id: "idp-x",
          external_user_id: "otto-x",
          external_username: "otto@provider.example",
        }),
    );
    const { context, page } = await signedInPage("otto");
    assert.match((await page.locator("#links-title ~ ul").textContent()) ?? "", /otto@provider\.example/);
    await page.getByRole("button", { name: "Remove idp-x" }).click();
    await page.locator(".notice").waitFor();
    assert.equal(await page.locator(".notice").textContent(), "The link was removed.");
    assert.deepEqual((await rest("GET", `${USERS}/${id}/links`)).json.links ?? [], []);
    await context.close();
  });

  it("signs one account out from the page, and refuses posts without the CSRF token or for another browser's account", async () => {
    const ida = await addHuman(platform, "oda", PASSWORD, { givenName: "Oda", familyName: "Lind" });
    await addHuman(platform, "ole", PASSWORD, { givenName: "Ole", familyName: "Lind" });
    const { context, page } = await signedInPage("oda");
    await page.goto(`${platform.url}/ui/login/loginname`);
    await page.getByLabel("Login name").fill("ole");
    await page.getByRole("button", { name: "Next" }).click();
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${platform.url}/`);
    assert.equal(await page.locator("#sessions-title ~ ul li").count(), 2);

    // a post without the token, and one naming oda's session from another browser: refused, nothing stored
    const odaSession = await page
      .locator('form[action="/ui/login/account/signout"] input[name="target"]')
      .nth(1)
      .getAttribute("value");
    const noToken = await page.request.post(`${platform.url}/ui/login/account/profile`, {
      form: { session: odaSession!, givenName: "X", familyName: "Y" },
      maxRedirects: 0,
    });
    assert.equal(noToken.status(), 403);
    const other = await signedInPage("ole");
    const before = await eventCount(platform);
    const otherCsrf = await other.page.locator('input[name="csrf"]').first().getAttribute("value");
    const foreign = await other.page.request.post(`${platform.url}/ui/login/account/profile`, {
      form: { csrf: otherCsrf!, session: odaSession!, givenName: "X", familyName: "Y" },
      maxRedirects: 0,
    });
    assert.equal(foreign.status(), 403);
    assert.equal(await eventCount(platform), before);
    assert.equal((await userOf(ida)).human.profile.given_name, "Oda");
    await other.context.close();

    await page.getByRole("button", { name: "Sign out Oda Lind" }).click();
    await page.locator(".notice").waitFor();
    assert.equal(await page.locator("#sessions-title ~ ul li").count(), 1);
    assert.match((await page.locator("#sessions-title ~ ul").textContent()) ?? "", /Ole Lind/);
    await context.close();
  });
});
