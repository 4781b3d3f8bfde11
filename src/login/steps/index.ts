/**
 * The login UI's steps, registered in order: one module per step, each with its routes, its form handling
 * and the name of its template (../templates). Every page is server-rendered HTML that works without
 * JavaScript; every form carries the CSRF token of the browser's cookie and every POST answers 303
 * (post/redirect/get). An error after a POST is kept on the auth request (`ui_state`) and shown by the page
 * the 303 leads to. The steps share ./kit.ts (the IdP steps also ./idp/kit.ts).
 *
 *   GET  /                            the account page for browsers, a JSON pointer for API clients (account)
 *   GET  /ui/assets/login.<hash>.css  the stylesheet (immutable; here)
 *   GET  /ui/login?authRequest=<id>   entry from the authorization endpoint: decides the next step, shows
 *                                     the login-name page itself when that is the next one (entry)
 *   GET  /ui/login/loginname          login name (also without auth request: sign-in to the account page)
 *   POST /ui/login/loginname
 *   GET  /ui/login/password           password of the login name or of the chosen session
 *   POST /ui/login/password           rate-limited per IP and per login name
 *   GET  /ui/login/passkey            "Sign in with a passkey" (passwordless; passkey/sign-in; the
 *   POST /ui/login/passkey            registration page of passkeys and security keys: passkey/register)
 *   GET  /ui/login/mfa/webauthn       a security key as second factor (mfa/webauthn); /mfa/setup/u2f
 *   POST /ui/login/mfa/webauthn       registers one (mfa/setup-u2f); each rate-limited per IP
 *   GET  /ui/login/select             account picker (the browser's sessions)
 *   POST /ui/login/select
 *   GET  /ui/login/register           registration (prompt=create, "Create an account")
 *   POST /ui/login/register           rate-limited per IP
 *   GET  /ui/login/idp/start          to an external identity provider (idp/start)
 *   GET  /ui/login/idp/callback       back from the provider (idp/callback)
 *   GET  /ui/login/idp/link           link to a local account after its password (idp/link)
 *   POST /ui/login/idp/link           rate-limited like the password
 *   GET  /ui/login/idp/register       the registration form, prefilled from the provider (idp/register)
 *   POST /ui/login/idp/register
 *   GET  /ui/login/password-change    a new password, when the password must be changed
 *   POST /ui/login/password-change    rate-limited like the password
 *   GET  /ui/login/password-reset     "Forgot password?": the login name; with userID and code (the
 *   POST /ui/login/password-reset     e-mail's link) a new password with the code (password-reset; also
 *   POST /ui/login/password-reset/set  /sent and /done)
 *   GET  /ui/login/verify-email       the e-mail code after registration or from its link; a new code
 *   POST /ui/login/verify-email       (verify-email; also /resend and /done)
 *   GET  /ui/login/invite             an invitation's link: the first password with the code, then signed
 *   POST /ui/login/invite             in (invite)
 *   GET  /ui/login/mfa                the second factor: the user's allowed factors, each to its page (mfa/choose)
 *   GET  /ui/login/mfa/setup          the prompt to register a second factor; "Skip" unless forced
 *   POST /ui/login/mfa/setup/skip     (mfa/setup)
 *   GET  /ui/login/mfa/totp           second factors: TOTP, codes by e-mail and SMS, recovery codes, and
 *   POST /ui/login/mfa/...            their enrolment (mfa/otp-steps.ts lists them)
 *   GET  /ui/login/complete           hands the authenticated auth request to the completer
 *   POST /ui/login/signout            ends the browser's sessions (signout)
 *   GET  /ui/login/signedout          "You are signed out" (signout)
 *   POST /ui/login/account/profile    the account page's forms (account/): profile, custom data (/data), e-mail and phone
 *   POST /ui/login/account/email      (changed, /verify with a code, /code for a new code), password,
 *   POST /ui/login/account/phone      removing a link to an identity provider, signing one account out;
 *   POST /ui/login/account/password   each rate-limited per IP (the password also per login name), each
 *   POST /ui/login/account/links/remove  answering 303 to the account page
 *   POST /ui/login/account/signout
 *   GET  /ui/login/account/passkeys/new  registering a passkey or security key; /verify, /remove (account/passkeys)
 *   GET  /ui/login/language           the language picker's links: keeps the choice in a cookie (language)
 *
 * A new step: a module here (./<step>.ts for /ui/login/<step>, a family of steps in a folder such as
 * ./idp/, ./mfa/ or ./passkey/) exporting a `Step`, added to STEPS below.
 */
import formbody from "@fastify/formbody";
import rateLimit from "@fastify/rate-limit";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { LoginIdps } from "../idp/login-idps.ts";
import type { Login } from "../login.ts";
import { sharedRateLimitStore } from "../rate-limits.ts";
import { STYLESHEET, WEBAUTHN_SCRIPT } from "../render.ts";
import {
  accountContactStep,
  accountDataStep,
  accountLinksStep,
  accountPasskeysStep,
  accountPasswordStep,
  accountProfileStep,
  accountSecurityOtpStep,
  accountSessionsStep,
  accountStep,
} from "./account/index.ts";
import { completeStep } from "./complete.ts";
import { entryStep } from "./entry.ts";
import { idpCallbackStep } from "./idp/callback.ts";
import { idpLinkStep } from "./idp/link.ts";
import { idpRegisterStep } from "./idp/register.ts";
import { idpStartStep } from "./idp/start.ts";
import { inviteStep } from "./invite.ts";
import { backToSignIn, type SignInLimits, StepKit } from "./kit.ts";
import { languageStep } from "./language.ts";
import { loginNameStep } from "./loginname.ts";
import { mfaChooseStep } from "./mfa/choose.ts";
import { OTP_STEPS } from "./mfa/otp-steps.ts";
import { mfaSetupStep } from "./mfa/setup.ts";
import { mfaSetupU2fStep } from "./mfa/setup-u2f.ts";
import { mfaWebAuthnStep } from "./mfa/webauthn.ts";
import { passkeyStep } from "./passkey/sign-in.ts";
import { passwordStep } from "./password.ts";
import { passwordChangeStep } from "./password-change.ts";
import { passwordResetStep } from "./password-reset.ts";
import { registerStep } from "./register.ts";
import { selectStep } from "./select.ts";
import { signOutStep } from "./signout.ts";
import { verifyEmailStep } from "./verify-email.ts";

/** A step: registers its routes in the login UI's scope (prefix /ui, so its paths start with /login). */
export type Step = (ui: FastifyInstance, kit: StepKit) => void;

/** Every step under /ui, in the order their routes are registered. */
const STEPS: readonly Step[] = [
  entryStep,
  loginNameStep,
  passwordStep,
  passkeyStep,
  mfaWebAuthnStep,
  mfaSetupU2fStep,
  selectStep,
  registerStep,
  idpStartStep,
  idpCallbackStep,
  idpLinkStep,
  idpRegisterStep,
  passwordChangeStep,
  passwordResetStep,
  verifyEmailStep,
  inviteStep,
  mfaChooseStep,
  mfaSetupStep,
  ...OTP_STEPS,
  completeStep,
  signOutStep,
  accountProfileStep,
  accountDataStep,
  accountContactStep,
  accountPasswordStep,
  accountSecurityOtpStep,
  accountLinksStep,
  accountPasskeysStep,
  accountSessionsStep,
  languageStep,
];

/** Codes by e-mail or SMS the sign-in pages send per client IP and window (docs/factors.md). */
const LOGIN_CODES_PER_IP = 20;
const LOGIN_CODES_WINDOW_MS = 10 * 60_000;

export async function registerLoginRoutes(app: FastifyInstance, login: Login): Promise<void> {
  const { config, db } = login.deps;
  const idps = new LoginIdps(login);

  // outside /ui: the account page at the server's root
  accountStep(app, login);

  await app.register(
    async (ui) => {
      await ui.register(formbody, { bodyLimit: 64 * 1024 });
      // PostgreSQL: counted in the database, shared by every process (../rate-limits.ts); embedded: in memory
      await ui.register(rateLimit, {
        global: false,
        ...(db.kind === "postgres" ? { store: sharedRateLimitStore(db, ui.log) } : {}),
      });
      const keys = new WeakMap<FastifyRequest, string>();
      const limits: SignInLimits = {
        keys,
        perIp:
          config.loginAttemptsPerIp > 0
            ? ui.createRateLimit({ max: config.loginAttemptsPerIp, timeWindow: 60_000 })
            : undefined,
        perName:
          config.loginAttemptsPerName > 0
            ? ui.createRateLimit({
                max: config.loginAttemptsPerName,
                timeWindow: 60_000,
                keyGenerator: (request) => `name:${keys.get(request) ?? ""}`,
              })
            : undefined,
        codesPerIp: ui.createRateLimit({
          max: LOGIN_CODES_PER_IP,
          timeWindow: LOGIN_CODES_WINDOW_MS,
          keyGenerator: (request) => `codes:${request.ip}`,
        }),
      };
      const kit = new StepKit(login, idps, limits);

      ui.setNotFoundHandler(async (request, reply) =>
        kit.sendMessage(request, reply, {
          status: 404,
          title: "error.title",
          message: "error.notFound",
          link: backToSignIn,
        }),
      );

      ui.setErrorHandler(async (error, request, reply) => {
        const status = (error as { statusCode?: number }).statusCode;
        if (status && status >= 400 && status < 500) {
          return kit.sendMessage(request, reply, {
            status,
            title: "error.title",
            message: "error.badRequest",
            link: backToSignIn,
          });
        }
        request.log.error({ err: error }, "login UI request failed");
        return kit
          .sendMessage(request, reply, {
            status: 500,
            title: "error.title",
            message: "error.server",
            link: backToSignIn,
          })
          .catch(() => reply.code(500).type("text/plain; charset=utf-8").send("internal error"));
      });

      ui.get(`/assets/login.${STYLESHEET.hash}.css`, async (_request, reply) =>
        reply
          .header("cache-control", "public, max-age=31536000, immutable")
          .type("text/css; charset=utf-8")
          .send(STYLESHEET.body),
      );

      ui.get(`/assets/webauthn.${WEBAUTHN_SCRIPT.hash}.js`, async (_request, reply) =>
        reply
          .header("cache-control", "public, max-age=31536000, immutable")
          .type("text/javascript; charset=utf-8")
          .send(WEBAUTHN_SCRIPT.body),
      );

      // the providers' kept-alive connections close with the server
      ui.addHook("onClose", async () => idps.close());

      for (const step of STEPS) step(ui, kit);
    },
    { prefix: "/ui" },
  );
}
