import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { addMachineUser, addOrg, startPlatform, type TestPlatform } from "../../test/helpers.ts";
import {
  addApp,
  addAppKey,
  addProjectGrant,
  addProjectRole,
  changeApp,
  changeProject,
  changeProjectRole,
  createProject,
  regenerateAppSecret,
  removeProjectRole,
  setProjectGrantState,
} from "../domain/project/commands.ts";
import type { OidcConfig } from "../domain/project/events.ts";
import { createSession, passwordPolicyOf } from "../domain/session/commands.ts";
import { changeSettings } from "../domain/settings/commands.ts";
import { OwnerType } from "../domain/settings/events.ts";
import { changeUserGrant, createUserGrant } from "../domain/usergrant/commands.ts";
import { AlreadyExistsError } from "../errors.ts";
import { newId } from "../id.ts";
import { lastSequenceSql } from "./eventstore.ts";
import type { NewEvent } from "./types.ts";

describe("event store", () => {
  let platform: TestPlatform;
  let instanceId: string;
  before(async () => {
    platform = await startPlatform();
    instanceId = platform.bootstrapResult!.instanceId;
  });
  after(() => platform.stop());

  const countEvents = async () =>
    Number((await platform.db.query<{ n: number }>("SELECT count(*)::int AS n FROM events"))[0].n);

  it("the last-sequence lookup uses the primary key on a fresh, never analyzed events table", async () => {
    const plan = (
      await platform.db.query<Record<string, string>>(
        `EXPLAIN ${lastSequenceSql("$1", "$2", "$3").replace("$1", "'i'").replace("$2", "'user'").replace("$3", "'u'")}`,
      )
    )
      .map((row) => Object.values(row)[0])
      .join("\n");
    assert.match(
      plan,
      /Index Only Scan Backward using events_pkey|Index Scan Backward using events_pkey/,
      plan,
    );
  });

  it("20 parallel writers to one aggregate: no duplicate sequence, no lost event", async () => {
    const aggregateId = newId();
    const ctx = { instanceId, creator: "test" };
    const writers = Array.from({ length: 20 }, (_, i) =>
      platform.eventStore.push(ctx, async (tx) => {
        const current = await tx.load("counter", aggregateId);
        return [
          {
            aggregateType: "counter",
            aggregateId,
            resourceOwner: instanceId,
            type: "counter.incremented",
            payload: { writer: i, seen: current.length },
          },
        ];
      }),
    );
    const results = await Promise.all(writers);
    assert.equal(results.flat().length, 20);
    const events = await platform.eventStore.aggregateEvents(instanceId, "counter", aggregateId);
    assert.deepEqual(
      events.map((e) => e.sequence),
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
    assert.deepEqual(new Set(events.map((e) => e.payload!.writer)).size, 20);
    // Each writer saw exactly the events before its own: the optimistic lock re-ran the losers.
    assert.deepEqual(
      events.map((e) => e.payload!.seen),
      Array.from({ length: 20 }, (_, i) => i),
    );
  });

  it("expect() locks on the current sequence without reading the history", async () => {
    const aggregateId = newId();
    const ctx = { instanceId, creator: "test" };
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        platform.eventStore.push(ctx, async (tx) => {
          const seen = await tx.expect("counter", aggregateId);
          return [
            {
              aggregateType: "counter",
              aggregateId,
              resourceOwner: instanceId,
              type: "counter.incremented",
              payload: { writer: i, seen },
            },
          ];
        }),
      ),
    );
    assert.equal(results.flat().length, 20);
    const events = await platform.eventStore.aggregateEvents(instanceId, "counter", aggregateId);
    assert.deepEqual(
      events.map((e) => [e.sequence, e.payload!.seen]),
      Array.from({ length: 20 }, (_, i) => [i + 1, i]),
    );
  });

  it("a unique-constraint violation rolls back the events and the projection rows", async () => {
    const orgId = platform.bootstrapResult!.orgId;
    const userEvent = (username: string): NewEvent => ({
      aggregateType: "user",
      aggregateId: newId(),
      resourceOwner: orgId,
      type: "user.machine.added",
      payload: { username, name: username, access_token_type: 0 },
      uniqueConstraints: [
        { action: "add", type: "username", field: username, ignoreCase: true, message: "taken" },
      ],
    });
    await platform.eventStore.push({ instanceId, creator: "test" }, async () => [userEvent("robot")]);
    const eventsBefore = await countEvents();
    const usersBefore = await platform.db.query("SELECT id FROM users ORDER BY id");

    // One push: a fresh user (would be projected) and a case-variant of a taken username.
    await assert.rejects(
      platform.eventStore.push({ instanceId, creator: "test" }, async () => [
        userEvent("fresh"),
        userEvent("ROBOT"),
      ]),
      (error) => error instanceof AlreadyExistsError && error.message === "taken",
    );
    assert.equal(await countEvents(), eventsBefore);
    assert.deepEqual(await platform.db.query("SELECT id FROM users ORDER BY id"), usersBefore);
    const claimed = await platform.db.query("SELECT 1 FROM unique_constraints WHERE unique_field = 'fresh'");
    assert.equal(claimed.length, 0);
  });

  it("events of aggregates the command did not load get their sequences in the INSERT: 1, 2, … after the last", async () => {
    const fresh = newId();
    const existing = newId();
    const ctx = { instanceId, creator: "test" };
    const counter = (aggregateId: string, n: number): NewEvent => ({
      aggregateType: "counter",
      aggregateId,
      resourceOwner: instanceId,
      type: "counter.incremented",
      payload: { n },
    });
    await platform.eventStore.push(ctx, async () => [counter(existing, 0)]);
    // neither aggregate loaded: a new one and one with history, interleaved
    const stored = await platform.eventStore.push(ctx, async () => [
      counter(fresh, 1),
      counter(existing, 2),
      counter(fresh, 3),
      counter(existing, 4),
    ]);
    assert.deepEqual(
      stored.map((e) => [e.aggregateId, e.sequence, e.payload!.n]),
      [
        [fresh, 1, 1],
        [existing, 2, 2],
        [fresh, 2, 3],
        [existing, 3, 4],
      ],
    );
    // 20 concurrent writers of one aggregate none of them loaded: the primary key orders them, no event lost
    const racing = newId();
    await Promise.all(
      Array.from({ length: 20 }, (_, i) => platform.eventStore.push(ctx, async () => [counter(racing, i)])),
    );
    const events = await platform.eventStore.aggregateEvents(instanceId, "counter", racing);
    assert.deepEqual(
      events.map((e) => e.sequence),
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
    assert.equal(new Set(events.map((e) => e.payload!.n)).size, 20);
  });

  it("a push returns its events as the events table holds them (payloads included)", async () => {
    const a = newId();
    const b = newId();
    const ctx = { instanceId, creator: "creator-1" };
    const stored = await platform.eventStore.push(ctx, async () => [
      {
        aggregateType: "counter",
        aggregateId: a,
        resourceOwner: "owner-a",
        type: "counter.incremented",
        payload: { z: 1, a: { nested: [1, "two", null, true] }, dropped: undefined, text: 'ü\u2028"' },
      },
      {
        aggregateType: "counter",
        aggregateId: b,
        resourceOwner: "owner-b",
        type: "counter.reset",
        payload: null,
      },
      { aggregateType: "counter", aggregateId: a, resourceOwner: "owner-a", type: "counter.reset" },
    ]);
    const read = [
      ...(await platform.eventStore.aggregateEvents(instanceId, "counter", a)),
      ...(await platform.eventStore.aggregateEvents(instanceId, "counter", b)),
    ].sort((x, y) => x.position - y.position);
    assert.deepEqual(stored, read);
    assert.deepEqual(
      stored.map((e) => [e.aggregateId, e.sequence, e.type, e.creator, e.resourceOwner]),
      [
        [a, 1, "counter.incremented", "creator-1", "owner-a"],
        [b, 1, "counter.reset", "creator-1", "owner-b"],
        [a, 2, "counter.reset", "creator-1", "owner-a"],
      ],
    );
  });

  it("two claims of one value in one push: ALREADY_EXISTS, nothing stored", async () => {
    const orgId = platform.bootstrapResult!.orgId;
    const before = await countEvents();
    const machine = (username: string): NewEvent => ({
      aggregateType: "user",
      aggregateId: newId(),
      resourceOwner: orgId,
      type: "user.machine.added",
      payload: { username, name: username, access_token_type: 0 },
      uniqueConstraints: [
        { action: "add", type: "username", field: username, ignoreCase: true, message: `${username} taken` },
      ],
    });
    await assert.rejects(
      platform.eventStore.push({ instanceId, creator: "test" }, async () => [
        machine("twin"),
        machine("TWIN"),
      ]),
      (error) => error instanceof AlreadyExistsError && error.message === "TWIN taken",
    );
    assert.equal(await countEvents(), before);
    const claimed = await platform.db.query("SELECT 1 FROM unique_constraints WHERE unique_field = 'twin'");
    assert.equal(claimed.length, 0);
  });

  it("rebuilding a projection gives identical read-model rows", async () => {
    // Every projection gets events: bootstrap made the identity ones, this the settings ones.
    await changeSettings(platform.eventStore, {
      category: "language",
      owner: { type: OwnerType.instance, id: instanceId },
      instanceId,
      set: { default_language: "de" },
      reset: [],
      creator: "test",
    });
    // Projects with roles, apps (OIDC and API, with a key and changes), a project grant and user grants.
    await projectEvents();
    // Sessions made in one append with their checks (the sessions projection applies those with one INSERT,
    // a rebuild one event after the other): the user's alone, and with an identity provider's.
    const admin = { id: platform.bootstrapResult!.adminUserId, orgId: platform.bootstrapResult!.orgId };
    const policy = passwordPolicyOf(platform.config);
    const actor = { instanceId, creator: admin.id };
    await createSession(platform.eventStore, actor, { user: admin, userAgentHash: "ua" }, policy);
    await createSession(platform.eventStore, actor, { user: admin, idpId: "idp-1" }, policy);
    // Every table of every projection, rows in a canonical order.
    const tables = platform.eventStore.projections.flatMap((p) => p.tables);
    const snapshot = async () => {
      const out: Record<string, unknown[]> = {};
      for (const table of tables) {
        out[table] = await platform.db.query(`SELECT * FROM ${table} ORDER BY (to_jsonb(${table}.*))::text`);
      }
      return out;
    };
    const before = await snapshot();
    assert.ok(before.users.length >= 2);
    assert.ok(before.sessions.some((row) => (row as { idp_id: string | null }).idp_id === "idp-1"));
    for (const table of ["project_roles", "apps", "app_keys", "project_grants", "user_grants"])
      assert.ok(before[table].length > 0, `${table} has rows`);
    for (const projection of platform.eventStore.projections) {
      const replayed = await platform.eventStore.rebuild(projection.name);
      const stored = await platform.db.query(
        "SELECT 1 FROM events WHERE aggregate_type = ANY($1) AND event_type = ANY($2) LIMIT 1",
        [projection.aggregateTypes, Object.keys(projection.handlers)],
      );
      assert.equal(replayed > 0, stored.length > 0, `${projection.name} replayed its events`);
    }
    assert.deepEqual(await snapshot(), before);
  });

  /** Events of every kind the project, apps and user grant projections handle (but removals). */
  async function projectEvents() {
    const es = platform.eventStore;
    const cmd = { instanceId, creator: "test" };
    const orgId = platform.bootstrapResult!.orgId;
    const { projectId } = await createProject(es, {
      ...cmd,
      orgId,
      name: "Rebuilt",
      roleAssertion: true,
      roleCheck: false,
    });
    await changeProject(es, { ...cmd, projectId, change: { project_role_check: true } });
    for (const key of ["a", "b", "c"])
      await addProjectRole(es, { ...cmd, projectId, role: { key, display_name: key, group: "g" } });
    await changeProjectRole(es, { ...cmd, projectId, key: "a", displayName: "A" });
    const oidc: OidcConfig = {
      redirect_uris: ["https://rebuilt.example/cb"],
      post_logout_redirect_uris: ["https://rebuilt.example/"],
      response_types: [0],
      grant_types: [0, 2],
      app_type: 0,
      auth_method: 3,
      access_token_type: 1,
      access_token_role_assertion: true,
      id_token_role_assertion: false,
      id_token_userinfo_assertion: true,
      dev_mode: false,
      clock_skew_ns: 1_500_000_000,
    };
    const { appId } = await addApp(es, { ...cmd, projectId, name: "web", oidc });
    await changeApp(es, { ...cmd, projectId, appId, name: "web 2", oidc: { ...oidc, dev_mode: true } });
    await addAppKey(es, {
      ...cmd,
      projectId,
      appId,
      keyId: newId(),
      publicKey: "PEM",
      expiration: "2099-01-01T00:00:00.000Z",
    });
    const api = await addApp(es, { ...cmd, projectId, name: "api", api: { auth_method: 0 } });
    await regenerateAppSecret(es, { ...cmd, projectId, appId: api.appId });
    const partner = await addOrg(platform, "Rebuild partner");
    const { grantId } = await addProjectGrant(es, {
      ...cmd,
      projectId,
      grantedOrgId: partner,
      roleKeys: ["a", "b", "c"],
      fields: { grantedOrgId: "g", roleKeys: "r" },
    });
    await setProjectGrantState(es, { ...cmd, projectId, grantId, action: "deactivate" });
    await setProjectGrantState(es, { ...cmd, projectId, grantId, action: "reactivate" });
    const fields = { userId: "u", roleKeys: "r", projectGrantId: "p" };
    const direct = await createUserGrant(es, {
      ...cmd,
      grantId: newId(),
      userId: platform.bootstrapResult!.adminUserId,
      projectId,
      roleKeys: ["a", "b"],
      fields,
    });
    await changeUserGrant(es, { ...cmd, grantId: direct.aggregateId, roleKeys: ["a", "b", "c"], fields });
    const { userId } = await addMachineUser(platform, { username: "rebuilt-partner", orgId: partner });
    await createUserGrant(es, {
      ...cmd,
      grantId: newId(),
      userId,
      projectId,
      projectGrantId: grantId,
      roleKeys: ["c"],
      fields,
    });
    await removeProjectRole(es, { ...cmd, projectId, key: "b" }); // cascades to both grants
  }

  it("a command that returns no events appends nothing", async () => {
    const before = await countEvents();
    const stored = await platform.eventStore.push({ instanceId, creator: "test" }, async () => []);
    assert.deepEqual(stored, []);
    assert.equal(await countEvents(), before);
  });
});
