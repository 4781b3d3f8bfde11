import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  addOrg,
  assertRejected,
  eventCount,
  type Json,
  type RestReply,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { activeIdpForOrg } from "../../query/idps.ts";
import { IDPS, NO_OPTIONS, setUp, validConfig } from "./testing.ts";

const ACTIVE = "EFFECTIVE_STATE_ACTIVE";
const INACTIVE = "EFFECTIVE_STATE_INACTIVE";
const ACTIVATE = "STATE_POLICY_ACTIVATE";
const DEACTIVATE = "STATE_POLICY_DEACTIVATE";
const INHERIT = "STATE_POLICY_INHERIT";

describe("identity providers as reusable resources: state policies, visibility, scoping, permissions", () => {
  let platform: TestPlatform;
  let s: Awaited<ReturnType<typeof setUp>>;
  let rest: ReturnType<typeof restClient>;
  const rejects = (call: () => Promise<RestReply>, status: number, code: number, message?: RegExp | string) =>
    assertRejected(platform, call, status, code, message);

  /** A codehost_b provider of the instance (or of `orgId`), active unless `policy` says otherwise. */
  const provider = async (
    name: string,
    options: { orgId?: string; policy?: string; token?: string } = {},
  ) => {
    const reply = await rest(
      "POST",
      `${IDPS}/codehost_b${options.orgId ? `?ctx.org_id=${options.orgId}` : ""}`,
      {
        json: { idp: { name, state_policy: options.policy }, config: validConfig("codehost_b") },
        token: options.token,
      },
    );
    assert.equal(reply.status, 201, reply.text);
    return reply.json.details.id as string;
  };
  const ctx = (orgId?: string) => (orgId ? `?ctx.org_id=${orgId}` : "");
  const setPolicy = async (id: string, orgId: string, policy: string, token?: string) => {
    const reply = await rest("PATCH", `${IDPS}/codehost_b/${id}${ctx(orgId)}`, {
      json: { idp: { state_policy: policy } },
      token,
    });
    assert.equal(reply.status, 200, reply.text);
    return reply.json;
  };
  const setOwnState = async (id: string, policy: string) => {
    const reply = await rest("PATCH", `${IDPS}/codehost_b/${id}`, {
      json: { idp: { state_policy: policy } },
    });
    assert.equal(reply.status, 200, reply.text);
  };
  /** What a context sees of a provider: by get, and by search (the same). */
  const seen = async (id: string, orgId?: string) => {
    const got = await rest("GET", `${IDPS}/codehost_b/${id}${ctx(orgId)}`);
    assert.equal(got.status, 200, got.text);
    const found = await rest("POST", `${IDPS}/_search${ctx(orgId)}`, { json: [{ id: { id } }] });
    assert.equal(found.json.result.length, 1, found.text);
    const item: Json = found.json.result[0];
    assert.equal(item.state, got.json.idp.state);
    assert.equal(item.idp.state_policy, got.json.idp.idp.idp.state_policy);
    assert.deepEqual(item.parent, got.json.idp.parent);
    assert.deepEqual(item.details, got.json.idp.details);
    return {
      state: got.json.idp.state as string,
      policy: got.json.idp.idp.idp.state_policy as string,
      parent: got.json.idp.parent as Json,
    };
  };
  const loginSees = async (id: string, orgId: string) =>
    (await activeIdpForOrg(platform.db, platform.deps.masterKey, s.instanceId, orgId, id)) !== null;
  const parentOf = (state: string) => ({ parent: { type: "OWNER_TYPE_INSTANCE", id: s.instanceId }, state });
  /** The instance's view of its provider: its own state and policy, no parent. */
  const assertInstanceView = async (id: string, state: string) => {
    assert.deepEqual(await seen(id), {
      state,
      policy: state === ACTIVE ? ACTIVATE : DEACTIVATE,
      parent: undefined,
    });
  };

  before(async () => {
    platform = await startPlatform({ listen: true });
    s = await setUp(platform);
    rest = restClient(platform, () => s.owner);
  });
  after(() => platform.stop());

  it("a child context inherits by default: state of the instance, policy INHERIT, parent set", async () => {
    const id = await provider("Inherited");
    assert.deepEqual(await seen(id, s.orgA), { state: ACTIVE, policy: INHERIT, parent: parentOf(ACTIVE) });
    const got = await rest("GET", `${IDPS}/codehost_b/${id}${ctx(s.orgA)}`);
    assert.deepEqual(got.json.idp.details.resource_owner, { type: "OWNER_TYPE_INSTANCE", id: s.instanceId });
    assert.deepEqual(got.json.idp.idp.config, { client_id: "cid-b", scopes: ["openid", "email"] });
    assert.deepEqual(got.json.idp.idp.idp.options, NO_OPTIONS);
    // INHERIT follows the instance's state as it changes
    await setOwnState(id, DEACTIVATE);
    assert.deepEqual(await seen(id, s.orgA), {
      state: INACTIVE,
      policy: INHERIT,
      parent: parentOf(INACTIVE),
    });
    assert.equal(await loginSees(id, s.orgA), false);
    await setOwnState(id, ACTIVATE);
    assert.deepEqual(await seen(id, s.orgA), { state: ACTIVE, policy: INHERIT, parent: parentOf(ACTIVE) });
    assert.equal(await loginSees(id, s.orgA), true);
  });

  it("§3 row 1: INHERIT → ACTIVATE in a child: active there; another child and the parent unaffected", async () => {
    const id = await provider("Row 1", { policy: DEACTIVATE });
    const reply = await setPolicy(id, s.orgA, ACTIVATE);
    assert.equal(reply.details.sequence, "2");
    assert.deepEqual(reply.details.resource_owner, { type: "OWNER_TYPE_INSTANCE", id: s.instanceId });
    assert.deepEqual(await seen(id, s.orgA), { state: ACTIVE, policy: ACTIVATE, parent: parentOf(INACTIVE) });
    assert.deepEqual(await seen(id, s.orgB), {
      state: INACTIVE,
      policy: INHERIT,
      parent: parentOf(INACTIVE),
    });
    await assertInstanceView(id, INACTIVE);
    assert.equal(await loginSees(id, s.orgA), true);
    assert.equal(await loginSees(id, s.orgB), false);
  });

  it("§3 row 2: INHERIT → DEACTIVATE in a child: inactive there; another child and the parent unaffected", async () => {
    const id = await provider("Row 2");
    await setPolicy(id, s.orgA, DEACTIVATE);
    assert.deepEqual(await seen(id, s.orgA), {
      state: INACTIVE,
      policy: DEACTIVATE,
      parent: parentOf(ACTIVE),
    });
    assert.deepEqual(await seen(id, s.orgB), { state: ACTIVE, policy: INHERIT, parent: parentOf(ACTIVE) });
    await assertInstanceView(id, ACTIVE);
    assert.equal(await loginSees(id, s.orgA), false);
    assert.equal(await loginSees(id, s.orgB), true);
  });

  it("§3 row 3: ACTIVATE or DEACTIVATE → INHERIT: the child follows the parent again (its policy removed)", async () => {
    // from ACTIVATE (instance inactive: back to inactive)
    const a = await provider("Row 3a", { policy: DEACTIVATE });
    await setPolicy(a, s.orgA, ACTIVATE);
    await setPolicy(a, s.orgA, INHERIT);
    assert.deepEqual(await seen(a, s.orgA), { state: INACTIVE, policy: INHERIT, parent: parentOf(INACTIVE) });
    assert.deepEqual(await seen(a, s.orgB), { state: INACTIVE, policy: INHERIT, parent: parentOf(INACTIVE) });
    await assertInstanceView(a, INACTIVE);
    // from DEACTIVATE (instance active: back to active)
    const d = await provider("Row 3b");
    await setPolicy(d, s.orgA, DEACTIVATE);
    await setPolicy(d, s.orgA, INHERIT);
    assert.deepEqual(await seen(d, s.orgA), { state: ACTIVE, policy: INHERIT, parent: parentOf(ACTIVE) });
    assert.deepEqual(await seen(d, s.orgB), { state: ACTIVE, policy: INHERIT, parent: parentOf(ACTIVE) });
    await assertInstanceView(d, ACTIVE);
    const rows = await platform.db.query(
      "SELECT 1 FROM reusable_state_policies WHERE resource_id = ANY($1)",
      [[a, d]],
    );
    assert.equal(rows.length, 0, "INHERIT stores no policy");
    // and follows the parent's later changes
    await setOwnState(d, DEACTIVATE);
    assert.equal((await seen(d, s.orgA)).state, INACTIVE);
  });

  it("§3 row 4: ACTIVATE → DEACTIVATE in a child", async () => {
    const id = await provider("Row 4");
    await setPolicy(id, s.orgA, ACTIVATE);
    await setPolicy(id, s.orgA, DEACTIVATE);
    assert.deepEqual(await seen(id, s.orgA), {
      state: INACTIVE,
      policy: DEACTIVATE,
      parent: parentOf(ACTIVE),
    });
    assert.deepEqual(await seen(id, s.orgB), { state: ACTIVE, policy: INHERIT, parent: parentOf(ACTIVE) });
    await assertInstanceView(id, ACTIVE);
    // a child's own policy wins over the parent's later changes
    await setOwnState(id, DEACTIVATE);
    await setOwnState(id, ACTIVATE);
    assert.equal((await seen(id, s.orgA)).state, INACTIVE);
  });

  it("§3 row 5: DEACTIVATE → ACTIVATE in a child", async () => {
    const id = await provider("Row 5", { policy: DEACTIVATE });
    await setPolicy(id, s.orgA, DEACTIVATE);
    await setPolicy(id, s.orgA, ACTIVATE);
    assert.deepEqual(await seen(id, s.orgA), { state: ACTIVE, policy: ACTIVATE, parent: parentOf(INACTIVE) });
    assert.deepEqual(await seen(id, s.orgB), {
      state: INACTIVE,
      policy: INHERIT,
      parent: parentOf(INACTIVE),
    });
    await assertInstanceView(id, INACTIVE);
  });

  it("setting the policy a child already has stores nothing; UNSPECIFIED in a child is refused", async () => {
    const id = await provider("Idempotent policy");
    const before = await eventCount(platform);
    const same = await setPolicy(id, s.orgA, INHERIT);
    assert.equal(same.details.sequence, "1");
    assert.equal(await eventCount(platform), before);
    await setPolicy(id, s.orgA, DEACTIVATE);
    const after = await eventCount(platform);
    assert.equal((await setPolicy(id, s.orgA, DEACTIVATE)).details.sequence, "2");
    assert.equal(await eventCount(platform), after);
    // an empty patch in the child changes nothing
    const empty = await rest("PATCH", `${IDPS}/codehost_b/${id}${ctx(s.orgA)}`, { json: {} });
    assert.equal(empty.status, 200);
    assert.equal(empty.json.details.sequence, "2");
    await rejects(
      () =>
        rest("PATCH", `${IDPS}/codehost_b/${id}${ctx(s.orgA)}`, {
          json: { idp: { state_policy: "STATE_POLICY_UNSPECIFIED" } },
        }),
      400,
      3,
      "idp.idp.state_policy: must be STATE_POLICY_ACTIVATE, STATE_POLICY_DEACTIVATE or STATE_POLICY_INHERIT",
    );
  });

  it("the configuration is read-only in a child context (FAILED_PRECONDITION, nothing changed); DELETE there too", async () => {
    const id = await provider("Read-only");
    const path = `${IDPS}/codehost_b/${id}${ctx(s.orgA)}`;
    for (const json of [
      { idp: { name: "Renamed" } },
      { idp: { options: { is_auto_creation: true } } },
      { idp: { name: "Renamed", state_policy: DEACTIVATE } },
      { config: { client_id: "other" } },
      { config: { client_secret: "other" } },
      { config: { scopes: ["x"] } },
      { idp: { state_policy: DEACTIVATE }, config: { client_id: "other" } },
    ]) {
      await rejects(
        () => rest("PATCH", path, { json }),
        400,
        9,
        "configuration is read-only in this context: only idp.idp.state_policy may be changed here",
      ).catch((e) => {
        throw new Error(`${JSON.stringify(json)}: ${e.message}`);
      });
    }
    await rejects(
      () => rest("DELETE", `${IDPS}/${id}${ctx(s.orgA)}`),
      400,
      9,
      /only be deleted in the context that owns it/,
    );
    const got = await rest("GET", `${IDPS}/codehost_b/${id}`);
    assert.equal(got.json.idp.idp.idp.name, "Read-only");
    assert.equal(got.json.idp.details.sequence, "1");
    // in its own organization, an organization's provider is fully writable
    const own = await provider("A's own", { orgId: s.orgA });
    const patched = await rest("PATCH", `${IDPS}/codehost_b/${own}${ctx(s.orgA)}`, {
      json: { idp: { name: "A's renamed", state_policy: DEACTIVATE }, config: { client_id: "a" } },
    });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual(await seen(own, s.orgA), { state: INACTIVE, policy: DEACTIVATE, parent: undefined });
    await rejects(
      () =>
        rest("PATCH", `${IDPS}/codehost_b/${own}${ctx(s.orgA)}`, {
          json: { idp: { state_policy: INHERIT } },
        }),
      400,
      3,
      "idp.idp.state_policy: STATE_POLICY_INHERIT is only possible in a child context",
    );
  });

  it("inactive providers stay visible in child contexts; an organization's provider is not visible in another", async () => {
    const off = await provider("Visible though inactive", { policy: DEACTIVATE });
    const ownA = await provider("Only A", { orgId: s.orgA });
    const inA = await rest("POST", `${IDPS}/_search${ctx(s.orgA)}`, { json: [] });
    const idsA = inA.json.result.map((r: Json) => r.details.id);
    assert.ok(idsA.includes(off) && idsA.includes(ownA));
    assert.equal(inA.json.result.find((r: Json) => r.details.id === off).state, INACTIVE);
    const inB = await rest("POST", `${IDPS}/_search${ctx(s.orgB)}`, { json: [] });
    const idsB = inB.json.result.map((r: Json) => r.details.id);
    assert.ok(idsB.includes(off));
    assert.ok(!idsB.includes(ownA), "A's provider is not B's");
    await rejects(() => rest("GET", `${IDPS}/codehost_b/${ownA}${ctx(s.orgB)}`), 404, 5);
    await rejects(
      () =>
        rest("PATCH", `${IDPS}/codehost_b/${ownA}${ctx(s.orgB)}`, {
          json: { idp: { state_policy: ACTIVATE } },
        }),
      404,
      5,
    );
    await rejects(() => rest("DELETE", `${IDPS}/${ownA}${ctx(s.orgB)}`), 404, 5);
    // the instance context sees an organization's provider as its owner does
    const fromInstance = await rest("GET", `${IDPS}/codehost_b/${ownA}?ctx.instance_id=${s.instanceId}`);
    assert.equal(fromInstance.status, 200);
    assert.equal(fromInstance.json.idp.parent, undefined);
    assert.equal(fromInstance.json.idp.idp.idp.state_policy, ACTIVATE);
    // an organization's provider has no children: a policy for it cannot be set from elsewhere
    assert.equal(await loginSees(ownA, s.orgB), false);
  });

  it("deleting a provider removes every organization's policy with it", async () => {
    const id = await provider("Deleted with policies");
    await setPolicy(id, s.orgA, DEACTIVATE);
    await setPolicy(id, s.orgB, ACTIVATE);
    const count = async () =>
      (await platform.db.query("SELECT 1 FROM reusable_state_policies WHERE resource_id = $1", [id])).length;
    assert.equal(await count(), 2);
    const deleted = await rest("DELETE", `${IDPS}/${id}`);
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal(deleted.json.details.sequence, "4");
    assert.equal(await count(), 0);
    await rejects(() => rest("GET", `${IDPS}/codehost_b/${id}${ctx(s.orgA)}`), 404, 5);
    const search = await rest("POST", `${IDPS}/_search${ctx(s.orgB)}`, { json: [{ id: { id } }] });
    assert.equal(search.json.result.length, 0);
    // an organization's provider is deleted from its organization
    const own = await provider("A's to delete", { orgId: s.orgA });
    assert.equal((await rest("DELETE", `${IDPS}/${own}${ctx(s.orgA)}`)).status, 200);
  });

  it("removing an organization removes its providers and its policies; the instance's providers stay", async () => {
    const gamma = await addOrg(platform, "Gamma");
    const shared = await provider("Shared with Gamma");
    await setPolicy(shared, gamma, DEACTIVATE);
    await setPolicy(shared, s.orgA, DEACTIVATE);
    const own = await provider("Gamma's own", { orgId: gamma });
    const removed = await rest("DELETE", `/resources/v3alpha/organizations/${gamma}`);
    assert.equal(removed.status, 200, removed.text);
    await rejects(() => rest("GET", `${IDPS}/codehost_b/${own}`), 404, 5);
    const secrets = await platform.db.query("SELECT 1 FROM idp_client_secrets WHERE idp_id = $1", [own]);
    assert.equal(secrets.length, 0, "its providers' secrets go with them");
    const policies = await platform.db.query<{ context_id: string }>(
      "SELECT context_id FROM reusable_state_policies WHERE resource_id = $1",
      [shared],
    );
    assert.deepEqual(
      policies.map((p) => p.context_id),
      [s.orgA],
      "only the removed organization's policy is gone",
    );
    assert.deepEqual(await seen(shared, s.orgA), {
      state: INACTIVE,
      policy: DEACTIVATE,
      parent: parentOf(ACTIVE),
    });
    await assertInstanceView(shared, ACTIVE);
  });

  it("an ORG_OWNER sets its organization's policy of an instance provider but cannot change the provider", async () => {
    const id = await provider("Instance's, org-owner managed");
    const path = `${IDPS}/codehost_b/${id}`;
    // reads and policy in its own organization
    const got = await rest("GET", `${path}${ctx(s.orgA)}`, { token: s.ownerA });
    assert.equal(got.status, 200, got.text);
    assert.equal(got.json.idp.idp.idp.state_policy, INHERIT);
    await setPolicy(id, s.orgA, DEACTIVATE, s.ownerA);
    assert.deepEqual(await seen(id, s.orgA), {
      state: INACTIVE,
      policy: DEACTIVATE,
      parent: parentOf(ACTIVE),
    });
    await setPolicy(id, s.orgA, INHERIT, s.ownerA);
    // the provider itself: 403 in the instance, read-only from its organization
    await rejects(
      () => rest("PATCH", path, { token: s.ownerA, json: { idp: { name: "Hijacked" } } }),
      403,
      7,
    );
    await rejects(
      () => rest("PATCH", path, { token: s.ownerA, json: { idp: { state_policy: DEACTIVATE } } }),
      403,
      7,
    );
    await rejects(
      () => rest("PATCH", `${path}${ctx(s.orgA)}`, { token: s.ownerA, json: { idp: { name: "Hijacked" } } }),
      400,
      9,
      /read-only/,
    );
    await rejects(
      () =>
        rest("PATCH", `${path}${ctx(s.orgA)}`, { token: s.ownerA, json: { config: { client_id: "mine" } } }),
      400,
      9,
      /read-only/,
    );
    await rejects(() => rest("DELETE", `${IDPS}/${id}`, { token: s.ownerA }), 403, 7);
    await rejects(() => rest("DELETE", `${IDPS}/${id}${ctx(s.orgA)}`, { token: s.ownerA }), 400, 9);
    await rejects(
      () => rest("GET", path, { token: s.ownerA }),
      403,
      7,
      "permission denied: idp.read is required",
    );
    // not in another organization
    await rejects(
      () =>
        rest("PATCH", `${path}${ctx(s.orgB)}`, {
          token: s.ownerA,
          json: { idp: { state_policy: DEACTIVATE } },
        }),
      403,
      7,
    );
    await rejects(() => rest("GET", `${path}${ctx(s.orgB)}`, { token: s.ownerA }), 403, 7);
    // creates, changes and deletes its organization's own providers, not in the instance or another org
    const own = await provider("A's by its owner", { orgId: s.orgA, token: s.ownerA });
    const renamed = await rest("PATCH", `${path.replace(id, own)}`, {
      token: s.ownerA,
      json: { idp: { name: "A's renamed by owner" } },
    });
    assert.equal(renamed.status, 200, "default context of a read or patch: the owning organization");
    await rejects(
      () =>
        rest("POST", `${IDPS}/codehost_b`, {
          token: s.ownerA,
          json: { idp: { name: "x" }, config: validConfig("codehost_b") },
        }),
      403,
      7,
    );
    await rejects(
      () =>
        rest("POST", `${IDPS}/codehost_b${ctx(s.orgB)}`, {
          token: s.ownerA,
          json: { idp: { name: "x" }, config: validConfig("codehost_b") },
        }),
      403,
      7,
    );
    const bOwn = await provider("B's", { orgId: s.orgB });
    await rejects(() => rest("GET", `${IDPS}/codehost_b/${bOwn}`, { token: s.ownerA }), 403, 7);
    await rejects(() => rest("DELETE", `${IDPS}/${bOwn}`, { token: s.ownerA }), 403, 7);
    // an ORG_OWNER_VIEWER reads only
    assert.equal((await rest("GET", `${path}${ctx(s.orgA)}`, { token: s.viewerA })).status, 200);
    await rejects(
      () =>
        rest("PATCH", `${path}${ctx(s.orgA)}`, {
          token: s.viewerA,
          json: { idp: { state_policy: DEACTIVATE } },
        }),
      403,
      7,
    );
    assert.equal((await rest("DELETE", `${IDPS}/${own}`, { token: s.ownerA })).status, 200);
  });

  it("search scoping: the instance sees its own and all organizations'; an organization its own and the instance's", async () => {
    const inst = await provider("Scope instance");
    const a = await provider("Scope A", { orgId: s.orgA });
    const b = await provider("Scope B", { orgId: s.orgB });
    const ids = async (query: string, token?: string) => {
      const reply = await rest("POST", `${IDPS}/_search${query}`, {
        json: [{ name: { name: "Scope ", method: "TEXT_FILTER_METHOD_STARTS_WITH" } }],
        token,
      });
      assert.equal(reply.status, 200, reply.text);
      return reply.json.result.map((r: Json) => r.details.id).sort();
    };
    assert.deepEqual(await ids(""), [inst, a, b].sort());
    assert.deepEqual(await ids(`?ctx.instance_id=${s.instanceId}`), [inst, a, b].sort());
    assert.deepEqual(await ids(ctx(s.orgA)), [inst, a].sort());
    assert.deepEqual(await ids(ctx(s.orgB)), [inst, b].sort());
    // owners of the organizations' providers in the results
    const inInstance = await rest("POST", `${IDPS}/_search`, { json: [{ id: { id: a } }] });
    assert.deepEqual(inInstance.json.result[0].details.resource_owner, {
      type: "OWNER_TYPE_ORG",
      id: s.orgA,
    });
    assert.equal(inInstance.json.result[0].parent, undefined);
    assert.equal(inInstance.json.result[0].type, "PROVIDER_TYPE_CODEHOST_B");
    // only what the caller may read: an ORG_OWNER sees its organization's, in the instance context too
    assert.deepEqual(await ids(ctx(s.orgA), s.ownerA), [inst, a].sort());
    assert.deepEqual(await ids("", s.ownerA), [a]);
    assert.deepEqual(await ids(ctx(s.orgB), s.ownerA), []);
    assert.deepEqual(await ids(ctx(s.orgA), s.nobody), []);
    await rejects(() => rest("POST", `${IDPS}/_search?ctx.org_id=4242`, { json: [] }), 404, 5);
  });

  it("search filters id, name (every method) and state (effective in the viewing context); all apply", async () => {
    const one = await provider("Filter One");
    const two = await provider("filter two", { policy: DEACTIVATE });
    const three = await provider("Filter Three", { orgId: s.orgA });
    await setPolicy(one, s.orgA, DEACTIVATE);
    await setPolicy(two, s.orgA, ACTIVATE);
    const find = async (filters: unknown[], query = "") => {
      const reply = await rest("POST", `${IDPS}/_search${query}`, { json: filters });
      assert.equal(reply.status, 200, reply.text);
      return reply.json.result.map((r: Json) => r.details.id).sort();
    };
    const scope = { name: { name: "filter", method: "TEXT_FILTER_METHOD_STARTS_WITH_IGNORE_CASE" } };
    assert.deepEqual(await find([{ id: { id: two } }]), [two]);
    assert.deepEqual(await find([{ id: { id: "4242" } }]), []);
    const byName: [string, string, string[]][] = [
      ["TEXT_FILTER_METHOD_EQUALS", "Filter One", [one]],
      ["TEXT_FILTER_METHOD_EQUALS", "filter one", []],
      ["TEXT_FILTER_METHOD_EQUALS_IGNORE_CASE", "FILTER ONE", [one]],
      ["TEXT_FILTER_METHOD_STARTS_WITH", "Filter T", [three]],
      ["TEXT_FILTER_METHOD_STARTS_WITH_IGNORE_CASE", "filter t", [two, three]],
      ["TEXT_FILTER_METHOD_CONTAINS", "ter T", [three]],
      ["TEXT_FILTER_METHOD_CONTAINS_IGNORE_CASE", "TER T", [two, three]],
      ["TEXT_FILTER_METHOD_ENDS_WITH", "two", [two]],
      ["TEXT_FILTER_METHOD_ENDS_WITH_IGNORE_CASE", "ONE", [one]],
    ];
    for (const [method, name, expected] of byName) {
      assert.deepEqual(await find([{ name: { name, method } }]), [...expected].sort(), `${method} ${name}`);
    }
    // default method: EQUALS
    assert.deepEqual(await find([{ name: { name: "Filter One" } }]), [one]);
    // state: effective in the viewing context
    assert.deepEqual(await find([scope, { state: { state: ACTIVE } }]), [one, three].sort());
    assert.deepEqual(await find([scope, { state: { state: INACTIVE } }]), [two]);
    assert.deepEqual(await find([scope, { state: { state: ACTIVE } }], ctx(s.orgA)), [two, three].sort());
    assert.deepEqual(await find([scope, { state: { state: INACTIVE } }], ctx(s.orgA)), [one]);
    assert.deepEqual(await find([scope, { state: { state: ACTIVE } }], ctx(s.orgB)), [one]);
    // all filters apply
    assert.deepEqual(await find([{ id: { id: one } }, { state: { state: INACTIVE } }], ctx(s.orgA)), [one]);
    assert.deepEqual(await find([{ id: { id: one } }, { state: { state: ACTIVE } }], ctx(s.orgA)), []);
  });

  it("search: sorting_column, paging, details; invalid list queries and filters are 400", async () => {
    const names = ["Sort b", "Sort a", "Sort c"];
    const ids: string[] = [];
    for (const name of names) ids.push(await provider(name));
    const filter = [{ name: { name: "Sort ", method: "TEXT_FILTER_METHOD_STARTS_WITH" } }];
    const run = async (query: string) => {
      const reply = await rest("POST", `${IDPS}/_search${query}`, { json: filter });
      assert.equal(reply.status, 200, reply.text);
      return reply.json;
    };
    const byDate = await run("");
    assert.equal(byDate.sorting_column, "IDP_FIELD_NAME_UNSPECIFIED");
    assert.deepEqual(
      byDate.result.map((r: Json) => r.details.id),
      [...ids].reverse(),
      "creation date, descending",
    );
    assert.deepEqual(
      (await run("?query.asc=true")).result.map((r: Json) => r.details.id),
      ids,
    );
    const byName = await run("?sorting_column=IDP_FIELD_NAME_NAME&query.asc=true");
    assert.equal(byName.sorting_column, "IDP_FIELD_NAME_NAME");
    assert.deepEqual(
      byName.result.map((r: Json) => r.idp.name),
      ["Sort a", "Sort b", "Sort c"],
    );
    assert.deepEqual(
      (await run("?sorting_column=IDP_FIELD_NAME_NAME")).result.map((r: Json) => r.idp.name),
      ["Sort c", "Sort b", "Sort a"],
    );
    const page = await run("?sorting_column=IDP_FIELD_NAME_NAME&query.asc=true&query.limit=2&query.offset=1");
    assert.deepEqual(
      page.result.map((r: Json) => r.idp.name),
      ["Sort b", "Sort c"],
    );
    assert.equal(page.details.applied_limit, 2);
    assert.equal(page.details.total_result, "3");
    assert.equal(page.details.end_of_list, true);
    const first = await run("?query.limit=1");
    assert.equal(first.details.end_of_list, false);
    assert.equal(first.details.total_result, "3");
    assert.equal(first.details.applied_limit, 1);
    assert.ok(Number(first.details.processed_sequence) > 0);
    assert.ok(first.details.timestamp);
    const beyond = await run("?query.offset=10");
    assert.equal(beyond.result.length, 0);
    assert.equal(beyond.details.total_result, "3");
    assert.equal((await run("?query.limit=1000")).details.applied_limit, 1000);
    assert.equal((await run("")).details.applied_limit, 100);
    const bad: [string, unknown, string | RegExp][] = [
      ["?query.limit=1001", [], "query.limit: must be at most 1000"],
      ["?query.limit=-1", [], /query\.limit/],
      ["?query.offset=x", [], /query\.offset/],
      ["?sorting_column=IDP_FIELD_NAME_COLOUR", [], /sorting_column/],
      ["?sorting_column=7", [], "sorting_column: must be a defined value"],
      ["", [{}], "filters[0].filter: one of id, name, state must be set"],
      ["", [{ id: { id: "1".repeat(201) } }], "filters[0].id.id: must be at most 200 characters"],
      ["", [{ name: { name: "n".repeat(201) } }], "filters[0].name.name: must be at most 200 characters"],
      ["", [{ name: { name: "n", method: 99 } }], "filters[0].name.method: must be a defined value"],
      ["", [{ state: {} }], "filters[0].state.state: is required"],
      ["", [{ state: { state: 7 } }], "filters[0].state.state: must be a defined value"],
      ["", Array.from({ length: 101 }, () => ({ id: { id: "1" } })), "filters: must have at most 100 items"],
      ["", { id: { id: "1" } }, /./],
      ["", [{ colour: "red" }], /colour/],
    ];
    for (const [query, body, message] of bad) {
      await rejects(() => rest("POST", `${IDPS}/_search${query}`, { json: body }), 400, 3, message).catch(
        (e) => {
          throw new Error(`${query} ${JSON.stringify(body).slice(0, 80)}: ${e.message}`);
        },
      );
    }
    // the passing side of the limits
    assert.equal(
      (await rest("POST", `${IDPS}/_search`, { json: [{ id: { id: "1".repeat(200) } }] })).status,
      200,
    );
    assert.equal(
      (await rest("POST", `${IDPS}/_search`, { json: [{ name: { name: "n".repeat(200) } }] })).status,
      200,
    );
    assert.equal(
      (
        await rest("POST", `${IDPS}/_search`, {
          json: Array.from({ length: 100 }, () => ({ id: { id: "1" } })),
        })
      ).status,
      200,
    );
    assert.equal((await rest("POST", `${IDPS}/_search`)).status, 200, "no body: no filters");
  });
});
