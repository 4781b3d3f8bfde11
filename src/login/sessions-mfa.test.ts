import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ACR_MFA } from "../domain/session/amr.ts";
import { loginDefaults } from "../domain/settings/login.ts";
import type { AuthRequest } from "./auth-requests.ts";
import {
  allowedSecondFactors,
  type LoginSession,
  nextStep,
  pendingStep,
  type SignInPolicy,
  selectionFor,
} from "./sessions.ts";

const now = new Date("2026-01-01T12:00:00Z");
const minutesAgo = (m: number) => new Date(now.getTime() - m * 60_000);
const HOUR = 3600;

function request(overrides: Partial<AuthRequest> = {}): AuthRequest {
  return {
    id: "1",
    instanceId: "i",
    clientId: "app",
    redirectUri: "https://app.example/cb",
    responseType: "code",
    scope: ["openid"],
    prompt: [],
    uiLocales: [],
    acrValues: [],
    uiState: {},
    createdAt: minutesAgo(1),
    expiresAt: minutesAgo(-9),
    ...overrides,
  };
}

/** Alice signed in with her password 30 minutes ago (before the request). */
function session(overrides: Partial<LoginSession> = {}): LoginSession {
  return {
    id: "s1",
    userId: "u1",
    orgId: "org",
    username: "alice",
    loginName: "alice@org.example",
    displayName: "Alice",
    authTime: minutesAgo(30),
    amr: ["pwd"],
    checks: { password: minutesAgo(30) },
    passwordCheckedAt: minutesAgo(30),
    passwordChangeRequired: false,
    createdAt: minutesAgo(60),
    changedAt: minutesAgo(30),
    factors: [],
    ...overrides,
  };
}

const policy = (overrides: Partial<SignInPolicy> = {}): SignInPolicy => ({ ...loginDefaults, ...overrides });
const pending = (r: AuthRequest, s: LoginSession, p: SignInPolicy = policy()) => pendingStep(r, s, now, p);

describe("the second-factor step", () => {
  it("none for a user without factors under the default policy (no prompt unless configured)", () => {
    assert.equal(pending(request(), session()), undefined);
    assert.deepEqual(
      nextStep(request(), [session()], { allowRegister: true, now, policyOf: () => policy() }),
      {
        step: "complete",
        session: session(),
      },
    );
  });

  it("a user with an allowed factor: the choice page until a second factor passed", () => {
    const withTotp = session({ factors: ["totp"] });
    assert.equal(pending(request(), withTotp), "mfa");
    const passed = session({ factors: ["totp"], checks: { password: minutesAgo(30), totp: minutesAgo(29) } });
    assert.equal(pending(request(), passed), undefined);
    // a factor the policy does not allow does not count
    assert.equal(
      pending(request(), withTotp, policy({ second_factors: ["SECOND_FACTOR_TYPE_U2F"] })),
      undefined,
    );
    // recovery codes alone never make the step appear
    assert.equal(pending(request(), session({ factors: ["recovery_codes"] })), undefined);
    assert.deepEqual(
      allowedSecondFactors(session({ factors: ["otp_sms", "totp", "recovery_codes"] }), policy()),
      ["totp", "otp_sms"],
    );
  });

  it("the second factor's lifetime, prompt=login and max_age ask for it again", () => {
    const passed = session({ factors: ["totp"], checks: { password: minutesAgo(30), totp: minutesAgo(29) } });
    assert.equal(pending(request(), passed, policy({ second_factor_check_lifetime: 28 * 60 })), "mfa");
    assert.equal(pending(request(), passed, policy({ second_factor_check_lifetime: 30 * 60 })), undefined);
    // prompt=login: the password first, then the second factor, each during this request
    assert.equal(pending(request({ prompt: ["login"] }), passed), "password");
    const newPassword = session({
      factors: ["totp"],
      checks: { password: new Date(now.getTime() - 1000), totp: minutesAgo(29) },
    });
    assert.equal(pending(request({ prompt: ["login"] }), newPassword), "mfa");
    // a fresh second factor alone does not replace the password prompt=login asks for
    const newCode = session({
      factors: ["totp"],
      checks: { password: minutesAgo(30), totp: new Date(now.getTime() - 1000) },
    });
    assert.equal(pending(request({ prompt: ["login"] }), newCode), "password");
    assert.equal(pending(request({ maxAge: 20 * 60 }), newPassword), "mfa");
  });

  it("the password's lifetime asks for the password again", () => {
    assert.equal(pending(request(), session(), policy({ password_check_lifetime: 29 * 60 })), "password");
    assert.equal(pending(request(), session(), policy({ password_check_lifetime: 30 * 60 })), undefined);
  });

  it("forced MFA: the registration for a user without factors, the choice page for one with", () => {
    const forced = policy({ force_mfa: true });
    assert.equal(pending(request(), session(), forced), "mfa-setup");
    assert.equal(pending(request(), session({ factors: ["otp_email"] }), forced), "mfa");
    // a skip does not help when forced
    assert.equal(pending(request(), session({ mfaInitSkippedAt: minutesAgo(1) }), forced), "mfa-setup");
    // a passkey that verified the user is two factors on its own
    const passkey = session({
      checks: { webauthn: minutesAgo(5), webauthnUserVerified: true },
      factors: ["passkey"],
    });
    assert.equal(pending(request(), passkey, forced), undefined);
    assert.equal(
      pending(request(), passkey, policy({ force_mfa: true, multi_factor_check_lifetime: 60 })),
      "mfa",
    );
  });

  it("force_mfa_local_only spares sign-ins through an identity provider", () => {
    const federated = session({
      checks: { idp: minutesAgo(30) },
      amr: ["fed"],
      passwordCheckedAt: undefined,
    });
    assert.equal(pending(request(), federated, policy({ force_mfa: true })), "mfa-setup");
    assert.equal(
      pending(request(), federated, policy({ force_mfa: true, force_mfa_local_only: true })),
      undefined,
    );
    assert.equal(
      pending(request(), session(), policy({ force_mfa: true, force_mfa_local_only: true })),
      "mfa-setup",
    );
    // acr_values=urn:platform:acr:mfa asks anyway
    assert.equal(
      pending(request({ acrValues: [ACR_MFA] }), federated, policy({ force_mfa_local_only: true })),
      "mfa-setup",
    );
  });

  it("acr_values=urn:platform:acr:mfa works like force_mfa for the request", () => {
    assert.equal(pending(request({ acrValues: [ACR_MFA] }), session()), "mfa-setup");
    assert.equal(pending(request({ acrValues: [ACR_MFA] }), session({ factors: ["totp"] })), "mfa");
    assert.equal(pending(request({ acrValues: ["urn:other"] }), session()), undefined);
  });

  it("not forced: the registration prompt with a skip lifetime, away for that long after a skip", () => {
    const prompting = policy({ mfa_init_skip_lifetime: 24 * HOUR });
    assert.equal(pending(request(), session(), prompting), "mfa-setup");
    assert.equal(pending(request(), session({ mfaInitSkippedAt: minutesAgo(60) }), prompting), undefined);
    assert.equal(
      pending(request(), session({ mfaInitSkippedAt: minutesAgo(24 * 60 + 1) }), prompting),
      "mfa-setup",
    );
    // nothing to register: no prompt
    assert.equal(
      pending(request(), session(), policy({ mfa_init_skip_lifetime: HOUR, second_factors: [] })),
      undefined,
    );
  });

  it("prompt=none: a second factor is login_required, its registration interaction_required", () => {
    const opts = (p: SignInPolicy) => ({ allowRegister: false, now, policyOf: () => p });
    assert.deepEqual(selectionFor(nextStep(request(), [session({ factors: ["totp"] })], opts(policy()))), {
      result: "login_required",
    });
    assert.deepEqual(selectionFor(nextStep(request(), [session()], opts(policy({ force_mfa: true })))), {
      result: "interaction_required",
    });
  });
});
