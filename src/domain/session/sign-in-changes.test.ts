import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  FACTOR_STRENGTH,
  factorRemovalAllowed,
  factorStrength,
  type SignInChangePolicy,
  sessionStrength,
  signInChangeAllowed,
} from "./sign-in-changes.ts";

const ALL: SignInChangePolicy = {
  second_factors: [
    "SECOND_FACTOR_TYPE_TOTP",
    "SECOND_FACTOR_TYPE_U2F",
    "SECOND_FACTOR_TYPE_OTP_EMAIL",
    "SECOND_FACTOR_TYPE_OTP_SMS",
  ],
  multi_factors: ["MULTI_FACTOR_TYPE_U2F_WITH_VERIFICATION"],
};
const at = new Date("2026-01-01T00:00:00Z");

describe("changes to how an account signs in", () => {
  it("orders the factors: verifying key ≥ security key ≥ authenticator app ≥ code by message ≥ first factor", () => {
    assert.equal(sessionStrength({ password: at }), FACTOR_STRENGTH.firstFactor);
    assert.equal(sessionStrength({ idp: at }), FACTOR_STRENGTH.firstFactor);
    assert.equal(sessionStrength({ password: at, otpEmail: at }), FACTOR_STRENGTH.codeByMessage);
    assert.equal(sessionStrength({ password: at, totp: at, otpSms: at }), FACTOR_STRENGTH.authenticatorApp);
    assert.equal(sessionStrength({ password: at, recoveryCode: at }), FACTOR_STRENGTH.authenticatorApp);
    assert.equal(sessionStrength({ password: at, webauthn: at }), FACTOR_STRENGTH.securityKey);
    assert.equal(sessionStrength({ webauthn: at, webauthnUserVerified: true }), FACTOR_STRENGTH.verifyingKey);
    assert.deepEqual(
      (["otp_email", "otp_sms", "totp", "u2f", "passkey"] as const).map(factorStrength),
      [1, 1, 2, 3, 4],
    );
  });

  it("a change needs the second factor of an account that has one, whoever added it", () => {
    const password = { password: at };
    assert.equal(signInChangeAllowed({ checks: password, factors: [], policy: ALL }), true);
    assert.equal(signInChangeAllowed({ checks: password, factors: ["recovery_codes"], policy: ALL }), true);
    assert.equal(signInChangeAllowed({ checks: password, factors: ["totp"], policy: ALL }), false);
    assert.equal(signInChangeAllowed({ checks: { idp: at }, factors: ["totp"], policy: ALL }), false);
    assert.equal(
      signInChangeAllowed({ checks: { ...password, otpEmail: at }, factors: ["totp"], policy: ALL }),
      true,
    );
    // a factor the policy does not let the user sign in with is not asked for
    const onlyKeys = { ...ALL, second_factors: ["SECOND_FACTOR_TYPE_U2F" as const] };
    assert.equal(signInChangeAllowed({ checks: password, factors: ["totp"], policy: onlyKeys }), true);
    // no session check at all: nothing
    assert.equal(signInChangeAllowed({ checks: {}, factors: [], policy: ALL }), false);
  });

  it("a removal needs a check at least as strong as the factor", () => {
    const input = (checks: object, removed: "totp" | "passkey" | "otp_email" | "recovery_codes") => ({
      checks: { password: at, ...checks },
      factors: ["totp", "passkey", "otp_email", "recovery_codes"] as const,
      policy: ALL,
      removed,
    });
    assert.equal(factorRemovalAllowed(input({}, "otp_email")), false);
    assert.equal(factorRemovalAllowed(input({ otpEmail: at }, "otp_email")), true);
    assert.equal(factorRemovalAllowed(input({ otpEmail: at }, "totp")), false);
    assert.equal(factorRemovalAllowed(input({ totp: at }, "totp")), true);
    assert.equal(factorRemovalAllowed(input({ recoveryCode: at }, "totp")), true);
    assert.equal(factorRemovalAllowed(input({ totp: at }, "passkey")), false);
    assert.equal(factorRemovalAllowed(input({ webauthn: at }, "passkey")), false);
    assert.equal(factorRemovalAllowed(input({ webauthn: at, webauthnUserVerified: true }, "passkey")), true);
    assert.equal(factorRemovalAllowed(input({ otpEmail: at }, "recovery_codes")), true);
    // the recovery codes of a user without a second factor: the first factor removes them
    assert.equal(
      factorRemovalAllowed({
        checks: { password: at },
        factors: ["recovery_codes"],
        policy: ALL,
        removed: "recovery_codes",
      }),
      true,
    );
  });
});
