import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  ACR_MFA,
  ACR_SINGLE_FACTOR,
  acrOf,
  amrOf,
  isMultiFactor,
  secondFactorTimes,
  supportedAcrValues,
} from "./amr.ts";

const at = (minute: number) => new Date(Date.UTC(2026, 0, 1, 12, minute));

describe("amr", () => {
  it("one factor: pwd, fed, or a key without user verification", () => {
    assert.deepEqual(amrOf({}), []);
    assert.deepEqual(amrOf({ password: at(0) }), ["pwd"]);
    assert.deepEqual(amrOf({ idp: at(0) }), ["fed"]);
    assert.deepEqual(amrOf({ webauthn: at(0) }), ["hwk"]);
    assert.deepEqual(amrOf({ webauthn: at(0), webauthnAmr: "swk" }), ["swk"]);
    assert.equal(isMultiFactor({ password: at(0) }), false);
  });

  it("two factors add mfa: a code after the password, a key after a provider, a passkey verifying the user", () => {
    assert.deepEqual(amrOf({ password: at(0), totp: at(1) }), ["pwd", "otp", "mfa"]);
    assert.deepEqual(amrOf({ password: at(0), recoveryCode: at(1) }), ["pwd", "otp", "mfa"]);
    assert.deepEqual(amrOf({ idp: at(0), webauthn: at(1) }), ["hwk", "fed", "mfa"]);
    assert.deepEqual(amrOf({ webauthn: at(0), webauthnUserVerified: true, webauthnAmr: "swk" }), [
      "swk",
      "user",
      "mfa",
    ]);
    // several codes are one kind of factor
    assert.deepEqual(amrOf({ otpEmail: at(0), otpSms: at(1) }), ["otp"]);
    assert.equal(isMultiFactor({ otpEmail: at(0), otpSms: at(1) }), false);
    assert.equal(isMultiFactor({ password: at(0), otpSms: at(1) }), true);
  });

  it("second-factor times, latest first, without the first factors", () => {
    assert.deepEqual(secondFactorTimes({ password: at(9), totp: at(1), webauthn: at(3), otpSms: at(2) }), [
      at(3),
      at(2),
      at(1),
    ]);
    assert.deepEqual(secondFactorTimes({ password: at(0), idp: at(1) }), []);
  });
});

describe("acr", () => {
  it("mfa when amr says so, else the single-factor class; none without any method", () => {
    assert.equal(acrOf(["pwd", "otp", "mfa"]), ACR_MFA);
    assert.equal(acrOf(["pwd"]), ACR_SINGLE_FACTOR);
    assert.equal(acrOf(["fed"]), ACR_SINGLE_FACTOR);
    assert.equal(acrOf([]), undefined);
    assert.equal(acrOf(null), undefined);
  });

  it("acr_values keeps the supported values once, in order, ignoring others", () => {
    assert.deepEqual(supportedAcrValues(undefined), []);
    assert.deepEqual(supportedAcrValues(`urn:other ${ACR_MFA}  ${ACR_MFA} ${ACR_SINGLE_FACTOR}`), [
      ACR_MFA,
      ACR_SINGLE_FACTOR,
    ]);
    assert.deepEqual(supportedAcrValues("urn:other"), []);
  });
});
