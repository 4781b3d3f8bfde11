/**
 * A project's `private_labeling_setting` where people see it (docs/branding.md "Projects: whose branding a
 * sign-in shows"): the login pages of its applications over HTTP (the login-name page, the password page,
 * the second factor's page) and the messages of their sign-ins received by a real SMTP server, for an
 * organization with its own colours and texts that owns the project.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { patchBranding } from "../../test/branding.ts";
import { addOrg, restClient } from "../../test/helpers.ts";
import {
  addHuman,
  createAuthRequest,
  formOf,
  HttpBrowser,
  type LoginTestPlatform,
  startLoginPlatform,
} from "../../test/login.ts";
import { type SmtpReceiver, startSmtpReceiver } from "../../test/smtp-receiver.ts";
import { ACR_MFA } from "../domain/session/amr.ts";
import { foldUser } from "../domain/user/commands.ts";
import { USER } from "../domain/user/events.ts";
import { addCallers } from "../services/actions/testing.ts";
import { UserFactorCommands } from "../services/users/factor-commands.ts";

const PASSWORD = "Secret-Passw0rd!";
const PROJECTS = "/resources/v3alpha/projects";
const SMTP = "/resources/v3alpha/smtp_providers";
const TEXTS = "/settings/v3alpha/texts";
const SETTING = {
  unspecified: "PRIVATE_LABELING_SETTING_UNSPECIFIED",
  enforce: "PRIVATE_LABELING_SETTING_ENFORCE_PROJECT_RESOURCE_OWNER_POLICY",
  allow: "PRIVATE_LABELING_SETTING_ALLOW_LOGIN_USER_RESOURCE_OWNER_POLICY",
} as const;
const BRAND_COLOR = "#b71c1c";
const INSTANCE_COLOR = "#6a1b9a";
/** The brand's card colour (the e-mails show it). */
const BRAND_BACKGROUND = "#fff8e1";
const BRAND_SUBJECT = "Your Brand sign-in code";
const BRAND_RESET_SUBJECT = "Reset your Brand password";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const title = (html: string) => /<h1 id="page-title">([^<]*)<\/h1>/.exec(html)?.[1];
const stylesheetOf = (html: string) =>
  /<link rel="stylesheet" href="(\/assets\/v3alpha\/[^"]+\.css)">/.exec(html)?.[1] ?? "";

describe("private labeling: whose branding and texts the sign-ins of a project's applications show", () => {
  let platform: LoginTestPlatform;
  let smtp: SmtpReceiver;
  let callers: Awaited<ReturnType<typeof addCallers>>;
  let instanceId: string;
  let brandOrg: string;
  /** Client IDs of an app in a project of the brand's organization, per setting. */
  const clients: Record<keyof typeof SETTING, string> = { unspecified: "", enforce: "", allow: "" };
  const projects: Record<keyof typeof SETTING, string> = { unspecified: "", enforce: "", allow: "" };
  const rest = restClient(
    () => platform,
    () => callers.owner,
  );

  /** A human with e-mail codes as second factor, in the instance's default organization or `orgId`. */
  async function addUserWithOtpEmail(username: string, orgId?: string) {
    const id = await addHuman(platform, username, PASSWORD, { orgId });
    const factors = new UserFactorCommands({ masterKey: platform.login.deps.masterKey! });
    await platform.eventStore.push({ instanceId, creator: "test" }, async (tx) =>
      factors.addOtp(tx, instanceId, foldUser(await tx.load(USER, id))!, "otp_email"),
    );
    return id;
  }

  /** The first message to `address` whose subject matches `subject` (waits up to 20 s). */
  async function mailTo(address: string, subject: RegExp) {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const found = smtp.received.find(
        (m) => m.envelope.to.includes(address) && subject.test(m.mail.subject ?? ""),
      );
      if (found) return found.mail;
      assert.ok(Date.now() < deadline, `no message to ${address} with a subject like ${subject}`);
      await sleep(50);
    }
  }

  /**
   * A sign-in of the app of `setting` by `loginName` (a second factor asked for): the login-name page, the
   * password page after the name was typed, and the page of the e-mailed code after the password.
   */
  async function signIn(
    setting: keyof typeof SETTING,
    loginName: string,
    extra: { orgId?: string; scope?: string[] } = {},
  ) {
    const browser = new HttpBrowser(platform.url);
    const authRequest = await createAuthRequest(platform, {
      clientId: clients[setting],
      acrValues: [ACR_MFA],
      ...extra,
    });
    const loginPage = await browser.follow(`/ui/login?authRequest=${authRequest.id}`);
    assert.equal(loginPage.status, 200, loginPage.text);
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName });
    assert.match(passwordPage.text, /name="password"/);
    const posted = await browser.post("/ui/login/password", {
      ...formOf(passwordPage.text, "/ui/login/password"),
      password: PASSWORD,
    });
    assert.equal(posted.status, 303, posted.text);
    const otpPage = await browser.follow(posted.location!);
    assert.match(otpPage.text, /action="\/ui\/login\/mfa\/otp-email"/, otpPage.text.slice(0, 400));
    return { browser, authRequest, loginPage, passwordPage, otpPage };
  }

  const brandStylesheet = () => new RegExp(`/branding/${brandOrg}/[0-9a-f]{16}\\.css$`);
  const instanceStylesheet = /\/branding\/-\/[0-9a-f]{16}\.css$/;
  /** A page in the brand's look and texts (its stylesheet sets its colour). */
  async function assertBrand(html: string, heading?: string) {
    assert.match(stylesheetOf(html), brandStylesheet());
    const css = await (await fetch(`${platform.url}${stylesheetOf(html)}`)).text();
    assert.match(css, new RegExp(`--accent: ${BRAND_COLOR};`));
    if (heading) assert.equal(title(html), heading);
  }
  function assertInstance(html: string, heading?: string) {
    assert.match(stylesheetOf(html), instanceStylesheet);
    if (heading) assert.equal(title(html), heading);
  }
  /** A page of the user's organization, the default one: the instance's look it inherits. */
  async function assertDefaultOrg(html: string) {
    const defaultOrg = platform.bootstrapResult!.orgId;
    assert.match(stylesheetOf(html), new RegExp(`/branding/${defaultOrg}/[0-9a-f]{16}\\.css$`));
    const css = await (await fetch(`${platform.url}${stylesheetOf(html)}`)).text();
    assert.match(css, new RegExp(`--accent: ${INSTANCE_COLOR};`));
  }

  before(async () => {
    smtp = await startSmtpReceiver({});
    platform = await startLoginPlatform();
    instanceId = platform.bootstrapResult!.instanceId;
    callers = await addCallers(platform);
    const provider = await rest("POST", SMTP, {
      json: { description: "mail", sender_address: "noreply@example.com", host: `127.0.0.1:${smtp.port}` },
    });
    assert.equal(provider.status, 201, provider.text);
    assert.equal((await rest("POST", `${SMTP}/${provider.json.details.id}/_activate`)).status, 200);

    brandOrg = await addOrg(platform, "Brand");
    // the instance has a look of its own, the brand's organization another, with its own texts
    await patchBranding(rest, { primary_color: { set: INSTANCE_COLOR } });
    await patchBranding(
      rest,
      { primary_color: { set: BRAND_COLOR }, background_color: { set: BRAND_BACKGROUND } },
      `?ctx.org_id=${brandOrg}`,
    );
    const texts = await rest("PATCH", `${TEXTS}/en?ctx.org_id=${brandOrg}`, {
      json: {
        texts: {
          "login.loginname.title": { set: "Welcome to Brand" },
          "login.password.title": { set: "Your Brand password" },
          "message.otp_email.subject": { set: BRAND_SUBJECT },
          "message.password_reset.subject": { set: BRAND_RESET_SUBJECT },
        },
      },
    });
    assert.equal(texts.status, 200, texts.text);

    for (const setting of Object.keys(SETTING) as Array<keyof typeof SETTING>) {
      const project = await rest("POST", `${PROJECTS}?ctx.org_id=${brandOrg}`, {
        json: { name: `Shop ${setting}`, private_labeling_setting: SETTING[setting] },
      });
      assert.equal(project.status, 201, project.text);
      projects[setting] = project.json.details.id;
      const app = await rest("POST", `${PROJECTS}/${projects[setting]}/apps`, {
        json: {
          name: `web ${setting}`,
          oidc: {
            redirect_uris: ["https://app.test/callback"],
            response_types: ["OIDC_RESPONSE_TYPE_CODE"],
            grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE"],
            app_type: "OIDC_APP_TYPE_WEB",
            auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
          },
        },
      });
      assert.equal(app.status, 201, app.text);
      clients[setting] = app.json.client_id;
    }
  });
  after(async () => {
    await platform.stop();
    await smtp.close();
  });

  it("UNSPECIFIED (the default): the instance's until the user is known, then the user's organization's", async () => {
    // a user of the brand's organization: its look only from the second factor on, as before the setting
    await addUserWithOtpEmail("erin", brandOrg);
    const { loginPage, passwordPage, otpPage } = await signIn("unspecified", "erin");
    assertInstance(loginPage.text, "Sign in");
    assertInstance(passwordPage.text, "Enter your password");
    await assertBrand(otpPage.text);
    // the code's message is the user's organization's
    const mail = await mailTo("erin@example.com", new RegExp(`^${BRAND_SUBJECT}$`));
    assert.match(String(mail.html), new RegExp(BRAND_BACKGROUND));
    // a user of another organization: the instance's pages, and the messages of the user's organization
    await addUserWithOtpEmail("henry");
    const other = await signIn("unspecified", "henry");
    assertInstance(other.loginPage.text, "Sign in");
    await assertDefaultOrg(other.otpPage.text);
    assert.notEqual((await mailTo("henry@example.com", /sign-in code/)).subject, BRAND_SUBJECT);
  });

  it("ENFORCE: the project's organization's from the first page, for a user of another organization too, and in the sign-in's messages", async () => {
    await addUserWithOtpEmail("dave");
    const { loginPage, passwordPage, otpPage } = await signIn("enforce", "dave");
    await assertBrand(loginPage.text, "Welcome to Brand");
    await assertBrand(passwordPage.text, "Your Brand password");
    await assertBrand(otpPage.text);
    // the code's e-mail: the brand's subject and colours, though dave is of the default organization
    const mail = await mailTo("dave@example.com", /sign-in code/);
    assert.equal(mail.subject, BRAND_SUBJECT);
    assert.match(String(mail.html), new RegExp(BRAND_BACKGROUND));
    assert.match(mail.text ?? "", /\b\d{6}\b/);

    // the password reset asked for on the sign-in's pages: the brand's message as well
    const browser = new HttpBrowser(platform.url);
    const authRequest = await createAuthRequest(platform, { clientId: clients.enforce });
    const resetPage = await browser.follow(`/ui/login/password-reset?authRequest=${authRequest.id}`);
    await assertBrand(resetPage.text);
    await browser.submit(resetPage, "/ui/login/password-reset", { loginName: "dave" });
    const reset = await mailTo("dave@example.com", /password/);
    assert.equal(reset.subject, BRAND_RESET_SUBJECT);
    // the button in the brand's colour, on its card colour
    assert.match(String(reset.html), new RegExp(BRAND_COLOR));
    assert.match(String(reset.html), new RegExp(BRAND_BACKGROUND));
  });

  it("ALLOW: the project's organization's until the user is known, then the user's (pages and messages)", async () => {
    await addUserWithOtpEmail("frank");
    const { loginPage, passwordPage, otpPage } = await signIn("allow", "frank");
    await assertBrand(loginPage.text, "Welcome to Brand");
    // a typed name is not looked up for the branding: still the project's organization's
    await assertBrand(passwordPage.text, "Your Brand password");
    // frank is known now: his organization's (the default one, which inherits the instance's look)
    await assertDefaultOrg(otpPage.text);
    const mail = await mailTo("frank@example.com", /sign-in code/);
    assert.notEqual(mail.subject, BRAND_SUBJECT);
    assert.match(mail.subject ?? "", /^Your .+ sign-in code$/);
    assert.doesNotMatch(String(mail.html), new RegExp(BRAND_BACKGROUND));
  });

  it("an organization the auth request names comes first, whatever the project says", async () => {
    const defaultOrg = platform.bootstrapResult!.orgId;
    await addUserWithOtpEmail("grace");
    const { loginPage, otpPage } = await signIn("enforce", "grace", {
      orgId: defaultOrg,
      scope: ["openid", `urn:platform:iam:org:id:${defaultOrg}`],
    });
    await assertDefaultOrg(loginPage.text);
    assert.equal(title(loginPage.text), "Sign in");
    await assertDefaultOrg(otpPage.text);
    const mail = await mailTo("grace@example.com", /sign-in code/);
    assert.notEqual(mail.subject, BRAND_SUBJECT);
  });

  it("a change of the project's setting shows at the next page", async () => {
    const page = async () => {
      const authRequest = await createAuthRequest(platform, { clientId: clients.unspecified });
      return (await new HttpBrowser(platform.url).follow(`/ui/login?authRequest=${authRequest.id}`)).text;
    };
    assertInstance(await page(), "Sign in");
    const patched = await rest("PATCH", `${PROJECTS}/${projects.unspecified}`, {
      json: { private_labeling_setting: SETTING.allow },
    });
    assert.equal(patched.status, 200, patched.text);
    await assertBrand(await page(), "Welcome to Brand");
    const back = await rest("PATCH", `${PROJECTS}/${projects.unspecified}`, {
      json: { private_labeling_setting: SETTING.unspecified },
    });
    assert.equal(back.status, 200, back.text);
    assertInstance(await page(), "Sign in");
  });
});
