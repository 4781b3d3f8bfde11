import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { AuthRequest } from "./auth-requests.ts";
import { type LoginSession, nextStep, selectionFor } from "./sessions.ts";

const now = new Date("2026-01-01T12:00:00Z");
const minutesAgo = (m: number) => new Date(now.getTime() - m * 60_000);

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

function session(id: string, username: string, overrides: Partial<LoginSession> = {}): LoginSession {
  return {
    id,
    userId: `u-${username}`,
    orgId: "org",
    username,
    loginName: `${username}@org.example`,
    displayName: username,
    authTime: minutesAgo(30),
    amr: ["pwd"],
    checks: { password: minutesAgo(30) },
    passwordCheckedAt: minutesAgo(30),
    passwordChangeRequired: false,
    createdAt: minutesAgo(60),
    changedAt: minutesAgo(30),
    ...overrides,
  };
}

const alice = session("s1", "alice");
const bob = session("s2", "bob");
const step = (r: AuthRequest, sessions: LoginSession[], allowRegister = true) =>
  nextStep(r, sessions, { allowRegister, now });

describe("nextStep", () => {
  it("no session: the login name, prefilled with login_hint", () => {
    assert.deepEqual(step(request(), []), { step: "loginname", loginName: undefined });
    assert.deepEqual(step(request({ loginHint: "carol" }), []), { step: "loginname", loginName: "carol" });
  });

  it("one session and no prompt: complete (SSO); several: the picker", () => {
    assert.deepEqual(step(request(), [alice]), { step: "complete", session: alice });
    assert.deepEqual(step(request(), [alice, bob]), { step: "select", sessions: [alice, bob] });
  });

  it("prompt=login and max_age ask for the password again", () => {
    assert.deepEqual(step(request({ prompt: ["login"] }), [alice]), { step: "password", session: alice });
    // a password check after the request started satisfies prompt=login
    const second = new Date(now.getTime() - 1000);
    const fresh = session("s1", "alice", { authTime: second, checks: { password: second } });
    assert.deepEqual(step(request({ prompt: ["login"] }), [fresh]), { step: "complete", session: fresh });
    assert.deepEqual(step(request({ maxAge: 600 }), [alice]), { step: "password", session: alice });
    assert.deepEqual(step(request({ maxAge: 3600 }), [alice]), { step: "complete", session: alice });
    assert.deepEqual(step(request({ maxAge: 0 }), [alice]), { step: "password", session: alice });
    const neverChecked = session("s3", "dave", { authTime: undefined, amr: [], checks: {} });
    assert.deepEqual(step(request(), [neverChecked]), { step: "password", session: neverChecked });
  });

  it("prompt=select_account shows the picker, login_hint's session first", () => {
    assert.deepEqual(step(request({ prompt: ["select_account"] }), [alice]), {
      step: "select",
      sessions: [alice],
    });
    assert.deepEqual(step(request({ prompt: ["select_account"], loginHint: "bob" }), [alice, bob]), {
      step: "select",
      sessions: [bob, alice],
    });
    assert.deepEqual(step(request({ prompt: ["select_account"] }), []), {
      step: "loginname",
      loginName: undefined,
    });
  });

  it("login_hint selects its session, or asks for that login name", () => {
    assert.deepEqual(step(request({ loginHint: "BOB@org.example" }), [alice, bob]), {
      step: "complete",
      session: bob,
    });
    // compared as usernames are: normalized and case folded
    assert.deepEqual(step(request({ loginHint: "ＢＯＢ" }), [alice, bob]), {
      step: "complete",
      session: bob,
    });
    assert.deepEqual(step(request({ loginHint: "carol" }), [alice]), {
      step: "loginname",
      loginName: "carol",
    });
  });

  it("id_token_hint selects its session (or its user's)", () => {
    assert.deepEqual(step(request({ hintSessionId: "s2" }), [alice, bob]), {
      step: "complete",
      session: bob,
    });
    assert.deepEqual(step(request({ hintUserId: "u-alice" }), [alice, bob]), {
      step: "complete",
      session: alice,
    });
    assert.deepEqual(step(request({ hintSessionId: "gone", hintUserId: "u-carol" }), [alice]), {
      step: "loginname",
      loginName: undefined,
    });
  });

  it("only sessions of the requested organization count", () => {
    const other = session("s4", "erin", { orgId: "other" });
    assert.deepEqual(step(request({ orgId: "org" }), [other, alice]), { step: "complete", session: alice });
    assert.deepEqual(step(request({ orgId: "nowhere" }), [other, alice]), {
      step: "loginname",
      loginName: undefined,
    });
  });

  it("prompt=create: registration when allowed, else the usual steps", () => {
    assert.deepEqual(step(request({ prompt: ["create"] }), [alice]), { step: "register" });
    assert.deepEqual(step(request({ prompt: ["create"] }), [alice], false), {
      step: "complete",
      session: alice,
    });
  });

  it("prompt=none: the session, login_required or interaction_required", () => {
    assert.deepEqual(selectionFor(step(request(), [alice])), { result: "session", session: alice });
    assert.deepEqual(selectionFor(step(request(), [])), { result: "login_required" });
    assert.deepEqual(selectionFor(step(request({ maxAge: 1 }), [alice])), { result: "login_required" });
    assert.deepEqual(selectionFor(step(request(), [alice, bob])), { result: "interaction_required" });
  });

  it("a required password change: the password first unless checked during this request, then a new one", () => {
    const mustChange = session("s5", "frank", { passwordChangeRequired: true });
    // signed in before this request: the current password again (single sign-on does not skip the change)
    assert.deepEqual(step(request(), [mustChange]), { step: "password", session: mustChange });
    assert.deepEqual(selectionFor(step(request(), [mustChange])), { result: "login_required" });
    // checked during this request: the new password
    const justChecked = session("s5", "frank", {
      passwordChangeRequired: true,
      authTime: new Date(now.getTime() - 1000),
      passwordCheckedAt: new Date(now.getTime() - 1000),
    });
    assert.deepEqual(step(request(), [justChecked]), { step: "password-change", session: justChecked });
    assert.deepEqual(selectionFor(step(request(), [justChecked])), { result: "interaction_required" });
    // signed in through an identity provider only: the password was not used
    const federated = session("s6", "gina", {
      passwordChangeRequired: true,
      amr: ["fed"],
      passwordCheckedAt: undefined,
    });
    assert.deepEqual(step(request(), [federated]), { step: "complete", session: federated });
  });
});
