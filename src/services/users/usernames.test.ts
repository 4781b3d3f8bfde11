/**
 * Usernames are compared by one key (src/domain/user/username.ts: NFKC, case folded, invisible characters
 * dropped) for uniqueness and for every lookup: the users API, the sessions API's login names, search.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  ADMIN_PASSWORD,
  addMachineUser,
  eventCount,
  type Json,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { usernameKey } from "../../domain/user/username.ts";

const USERS = "/resources/v3alpha/users";
const SESSIONS = "/resources/v3alpha/sessions";

describe("usernames: one normalized, case-folded key for uniqueness and lookup", () => {
  let platform: TestPlatform;
  let owner: string;

  const rest = restClient(
    () => platform,
    () => owner,
  );
  const human = (username: string) => ({
    username,
    human: {
      profile: { given_name: "Ada", family_name: "Lovelace" },
      email: { address: "ada@example.com", is_verified: true },
      password: { password: "Secret-Passw0rd!" },
    },
  });

  before(async () => {
    platform = await startPlatform({ listen: true });
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
  });
  after(() => platform.stop());

  it("refuses look-alikes of an existing username (dotted İ, fullwidth, case, invisible characters) with 409, never 500", async () => {
    // `admin` is the bootstrap administrator
    for (const lookAlike of ["admİn", "ａｄｍｉｎ", "ADMIN", "Admın", "ad\u200Bmin", "ａｄｍİｎ"]) {
      const before = await eventCount(platform);
      const created = await rest("POST", USERS, { json: human(lookAlike) });
      assert.equal(created.status, 409, `${lookAlike}: ${created.status} ${created.text}`);
      assert.equal(created.json.code, 6);
      assert.equal(await eventCount(platform), before, "nothing stored");
    }
  });

  it("concurrent creates of one username: the unique index lets one through, the others get 409 and store nothing", async () => {
    const before = await eventCount(platform);
    const spellings = ["Racer", "RACER", "racer", "ｒａｃｅｒ", "Racer", "rAcEr", "racer", "RACER"];
    const answers = await Promise.all(spellings.map((name) => rest("POST", USERS, { json: human(name) })));
    const statuses = answers.map((a) => a.status).sort();
    assert.deepEqual(
      statuses,
      [201, 409, 409, 409, 409, 409, 409, 409],
      answers.map((a) => a.text).join("\n"),
    );
    for (const refused of answers.filter((a) => a.status === 409)) {
      assert.equal(refused.json.code, 6);
      assert.match(refused.json.message, /is already taken/);
    }
    assert.equal(await eventCount(platform), before + 1, "one event: the user created");
    const rows = await platform.db.query("SELECT id FROM users WHERE username_key = $1", [
      usernameKey("racer"),
    ]);
    assert.equal(rows.length, 1);
    const created = answers.find((a) => a.status === 201)!;
    assert.equal(rows[0].id, created.json.details.id);
    assert.equal(created.json.details.sequence, "1");
  });

  it("treats German sharp s and Greek final sigma as their case folds", async () => {
    assert.equal((await rest("POST", USERS, { json: human("straße") })).status, 201);
    assert.equal((await rest("POST", USERS, { json: human("STRASSE") })).status, 409);
    assert.equal((await rest("POST", USERS, { json: human("ΣΟΦΟΣ") })).status, 201);
    assert.equal((await rest("POST", USERS, { json: human("σοφος") })).status, 409);
  });

  it("a rename to a look-alike of another user is refused; the old name is released under its key", async () => {
    const id = (await rest("POST", USERS, { json: human("Émile") })).json.details.id;
    const taken = await rest("PATCH", `${USERS}/${id}`, { json: { username: "ａｄｍｉｎ" } });
    assert.equal(taken.status, 409, taken.text);
    // another spelling of its own name keeps its key
    const respelled = await rest("PATCH", `${USERS}/${id}`, { json: { username: "ÉMILE" } });
    assert.equal(respelled.status, 200, respelled.text);
    assert.equal((await rest("GET", `${USERS}/${id}`)).json.user.username, "ÉMILE");
    const renamed = await rest("PATCH", `${USERS}/${id}`, { json: { username: "emile2" } });
    assert.equal(renamed.status, 200, renamed.text);
    // the old name (decomposed É this time) is free again
    const again = await rest("POST", USERS, { json: human("E\u0301MILE") });
    assert.equal(again.status, 201, again.text);
  });

  it("refuses control characters and names too long once normalized (400, nothing stored)", async () => {
    const before = await eventCount(platform);
    for (const [username, message] of [
      ["bell\u0007name", /control characters/],
      ["\u200B\u200D", /visible character/],
      ["\uFDFA".repeat(20), /at most 200 characters/],
    ] as const) {
      const created = await rest("POST", USERS, { json: human(username) });
      assert.equal(created.status, 400, created.text);
      assert.equal(created.json.code, 3);
      assert.match(created.json.message, message);
      assert.match(created.json.message, /user\.username/);
    }
    assert.equal(await eventCount(platform), before);
  });

  it("finds the user by any form of its login name (sessions API) and by search ignoring case", async () => {
    for (const loginName of ["ａｄｍｉｎ", "admİn", "ADMIN", `ＡＤＭＩＮ@platform.localhost`]) {
      const created = await rest("POST", SESSIONS, {
        json: { checks: { user: { login_name: loginName }, password: { password: ADMIN_PASSWORD } } },
      });
      assert.equal(created.status, 201, `${loginName}: ${created.text}`);
    }
    const found = await rest("POST", `${USERS}/_search`, {
      json: [{ username: { username: "ＡＤＭİＮ", method: "TEXT_FILTER_METHOD_EQUALS_IGNORE_CASE" } }],
    });
    assert.equal(found.status, 200, found.text);
    assert.deepEqual(
      found.json.result.map((u: Json) => u.username),
      ["admin"],
    );
    const prefix = await rest("POST", `${USERS}/_search`, {
      json: [{ username: { username: "ＡＤ", method: "TEXT_FILTER_METHOD_STARTS_WITH_IGNORE_CASE" } }],
    });
    assert.deepEqual(
      prefix.json.result.map((u: Json) => u.username),
      ["admin"],
    );
  });

  it("stores the key in the read model and the unique constraint", async () => {
    const rows = await platform.db.query<{ username_key: string }>(
      "SELECT username_key FROM users WHERE username = 'admin'",
    );
    assert.equal(rows[0].username_key, "admin");
    const constraints = await platform.db.query<{ unique_field: string }>(
      "SELECT unique_field FROM unique_constraints WHERE unique_type = 'username' AND unique_field = $1",
      [usernameKey("Straße")],
    );
    assert.equal(constraints.length, 1);
  });
});
