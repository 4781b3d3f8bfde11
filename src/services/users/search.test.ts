import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  addMachineUser,
  addOrg,
  type Json,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { addMachineEvent } from "../../domain/user/commands.ts";
import { newId } from "../../id.ts";

const USERS = "/resources/v3alpha/users";
const PROJECTS = "/resources/v3alpha/projects";

// Searches read their page, total_result and processed_sequence in separate queries served by indexes
// (src/query/search.ts): the totals of unfiltered and per-organization searches from counters kept by
// the read models' writes, the others from a count of the filter. These tests hold them to the exact
// answer after creates and deletes, across page boundaries and past the end.
describe("searches: paging, total_result and text filters", () => {
  let platform: TestPlatform;
  let owner: string;

  const rest = restClient(
    () => platform,
    () => owner,
  );
  const machine = (username: string) => ({
    username,
    machine: { name: `${username} service`, access_token_type: "ACCESS_TOKEN_TYPE_JWT" },
  });
  const human = (username: string, email: string) => ({
    username,
    human: { profile: { given_name: "Search", family_name: "Test" }, email: { address: email } },
  });
  const createUser = async (user: unknown, orgId: string) => {
    const r = await rest("POST", `${USERS}?ctx.org_id=${orgId}`, { json: user });
    assert.equal(r.status, 201, r.text);
    return r.json.details.id as string;
  };
  const deleteUser = async (id: string) => {
    const r = await rest("DELETE", `${USERS}/${id}`);
    assert.equal(r.status, 200, r.text);
  };
  const search = async (query: string, filters: unknown[] = []) => {
    const r = await rest("POST", `${USERS}/_search${query}`, { json: filters });
    assert.equal(r.status, 200, r.text);
    return {
      ids: r.json.result.map((u: Json) => u.details.id as string),
      usernames: r.json.result.map((u: Json) => u.username as string),
      total: Number(r.json.details.total_result),
      end: r.json.details.end_of_list as boolean,
      processed: BigInt(r.json.details.processed_sequence ?? 0),
    };
  };
  /** Every user of a search, page after page of `limit`, checking each page's total. */
  const allPages = async (query: string, limit: number, filters: unknown[] = []) => {
    const ids: string[] = [];
    let total = -1;
    for (let offset = 0; ; offset += limit) {
      const page = await search(
        `${query}${query ? "&" : "?"}query.limit=${limit}&query.offset=${offset}`,
        filters,
      );
      if (total === -1) total = page.total;
      assert.equal(page.total, total, `total of the page at offset ${offset}`);
      ids.push(...page.ids);
      assert.equal(page.end, offset + page.ids.length >= total);
      if (page.ids.length < limit) break;
    }
    assert.equal(new Set(ids).size, ids.length, "no user twice");
    return { ids, total };
  };

  before(async () => {
    platform = await startPlatform({ listen: true });
    ({ token: owner } = await addMachineUser(platform, {
      username: "search-owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
  });
  after(() => platform.stop());

  it("total_result is exact: unfiltered, per organization and filtered, after creates and deletes", async () => {
    const orgA = await addOrg(platform, "Count Org A");
    const orgB = await addOrg(platform, "Count Org B");
    const before = await search("?query.limit=1");
    assert.ok(before.total >= 1);

    const inA: string[] = [];
    for (let i = 0; i < 7; i++) inA.push(await createUser(machine(`count-a-${i}`), orgA));
    const inB: string[] = [];
    for (let i = 0; i < 3; i++) inB.push(await createUser(machine(`count-b-${i}`), orgB));
    const prefix = [{ username: { username: "count-", method: "TEXT_FILTER_METHOD_STARTS_WITH" } }];

    // limit 2: the total is not the page, it is counted (or read from the counters)
    assert.equal((await search("?query.limit=2")).total, before.total + 10);
    assert.equal((await search(`?ctx.org_id=${orgA}&query.limit=2`)).total, 7);
    assert.equal((await search(`?ctx.org_id=${orgB}&query.limit=2`)).total, 3);
    assert.equal((await search("?query.limit=2", prefix)).total, 10);
    assert.equal((await search(`?ctx.org_id=${orgA}&query.limit=2`, prefix)).total, 7);

    // pages in order (newest first), each once, whatever the page size
    const a = await allPages(`?ctx.org_id=${orgA}`, 3);
    assert.deepEqual(a.ids, [...inA].reverse());
    const ascending = await allPages(`?ctx.org_id=${orgA}&query.asc=true`, 2);
    assert.deepEqual(ascending.ids, inA);
    const filtered = await allPages("", 4, prefix);
    assert.deepEqual(filtered.ids.sort(), [...inA, ...inB].sort());
    const everyone = await allPages("", 5);
    assert.equal(everyone.ids.length, before.total + 10);

    // past the end: no rows, the exact total, end of list
    const past = await search(`?ctx.org_id=${orgA}&query.offset=50&query.limit=2`);
    assert.deepEqual(past.ids, []);
    assert.equal(past.total, 7);
    assert.equal(past.end, true);

    await deleteUser(inA[0]);
    await deleteUser(inA[3]);
    await deleteUser(inB[1]);
    assert.equal((await search("?query.limit=2")).total, before.total + 7);
    assert.equal((await search(`?ctx.org_id=${orgA}&query.limit=2`)).total, 5);
    assert.equal((await search(`?ctx.org_id=${orgB}&query.limit=2`)).total, 2);
    assert.equal((await search("?query.limit=2", prefix)).total, 7);
    assert.deepEqual((await allPages(`?ctx.org_id=${orgA}`, 2)).ids, [
      inA[6],
      inA[5],
      inA[4],
      inA[2],
      inA[1],
    ]);

    // read-your-writes: the processed sequence follows the newest user event at once
    const last = await search("?query.limit=1");
    await createUser(machine("count-a-last"), orgA);
    const next = await search("?query.limit=1");
    assert.ok(next.processed > last.processed);
    assert.equal(next.total, last.total + 1);
  });

  it("totals stay exact across many writes (the counters are folded) and deep offsets", async () => {
    const instanceId = platform.bootstrapResult!.instanceId;
    const bulkOrg = await addOrg(platform, "Bulk Count Org");
    const ids: string[] = [];
    // 150 users in one transaction: more counter rows than a search folds at once
    await platform.eventStore.push({ instanceId, creator: "test" }, async () =>
      Array.from({ length: 150 }, (_, i) => {
        const id = newId();
        ids.push(id);
        return addMachineEvent(id, bulkOrg, {
          username: `bulk-count-${i}`,
          name: `bulk ${i}`,
          access_token_type: 0,
        });
      }),
    );
    const expected = [...ids].reverse(); // same creation time: the ID breaks the tie, newest first
    for (let i = 0; i < 3; i++) {
      const first = await search(`?ctx.org_id=${bulkOrg}&query.limit=10`);
      assert.equal(first.total, 150);
      assert.deepEqual(first.ids, expected.slice(0, 10));
    }
    // the searches folded the organization's 150 counter rows into one
    const [rows] = await platform.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM search_counts WHERE instance_id = $1 AND resource = 'users' AND scope = $2",
      [instanceId, bulkOrg],
    );
    assert.equal(rows.n, 1);
    const deep = await search(`?ctx.org_id=${bulkOrg}&query.offset=137&query.limit=10`);
    assert.deepEqual(deep.ids, expected.slice(137, 147));
    assert.equal(deep.total, 150);
    assert.equal(deep.end, false);
    const tail = await search(`?ctx.org_id=${bulkOrg}&query.offset=145&query.limit=10`);
    assert.deepEqual(tail.ids, expected.slice(145));
    assert.equal(tail.total, 150);
    assert.equal(tail.end, true);
    await deleteUser(ids[0]);
    const after = await search(`?ctx.org_id=${bulkOrg}&query.limit=10`);
    assert.equal(after.total, 149);
    assert.deepEqual(after.ids, expected.slice(0, 10));
    assert.equal((await search(`?ctx.org_id=${bulkOrg}&query.offset=140&query.limit=10`)).ids.length, 9);
  });

  it("e-mail and username EQUALS / STARTS_WITH: case and LIKE wildcards", async () => {
    const org = await addOrg(platform, "Text Filter Org");
    await createUser(human("Tf_Mixed", "Tf.Mixed@Example.test"), org);
    await createUser(human("tf_lower", "tf.mixed@example.test"), org);
    await createUser(human("tfXlower", "tfXmixed@example.test"), org);
    await createUser(human("tf%pct", "tf%pct@example.test"), org);
    const byEmail = async (address: string, method: string) =>
      (
        await search(`?ctx.org_id=${org}`, [{ email: { address, method: `TEXT_FILTER_METHOD_${method}` } }])
      ).usernames.sort();
    const byName = async (username: string, method: string) =>
      (
        await search(`?ctx.org_id=${org}`, [
          { username: { username, method: `TEXT_FILTER_METHOD_${method}` } },
        ])
      ).usernames.sort();

    assert.deepEqual(await byEmail("Tf.Mixed@Example.test", "EQUALS"), ["Tf_Mixed"]);
    assert.deepEqual(await byEmail("tf.mixed@example.test", "EQUALS"), ["tf_lower"]);
    assert.deepEqual(await byEmail("TF.MIXED@EXAMPLE.TEST", "EQUALS"), []);
    assert.deepEqual(await byEmail("TF.MIXED@EXAMPLE.TEST", "EQUALS_IGNORE_CASE"), ["Tf_Mixed", "tf_lower"]);
    assert.deepEqual(await byEmail("Tf.", "STARTS_WITH"), ["Tf_Mixed"]);
    assert.deepEqual(await byEmail("TF.", "STARTS_WITH_IGNORE_CASE"), ["Tf_Mixed", "tf_lower"]);
    // `.` `_` `%` match only themselves
    assert.deepEqual(await byEmail("tf_", "STARTS_WITH_IGNORE_CASE"), []);
    assert.deepEqual(await byEmail("tf%", "STARTS_WITH"), ["tf%pct"]);
    assert.deepEqual(await byEmail("t%", "STARTS_WITH_IGNORE_CASE"), []);
    assert.deepEqual(await byEmail("tf%pct@example.test", "EQUALS"), ["tf%pct"]);
    assert.deepEqual(await byEmail("tf_pct@example.test", "EQUALS_IGNORE_CASE"), []);

    assert.deepEqual(await byName("Tf_Mixed", "EQUALS"), ["Tf_Mixed"]);
    assert.deepEqual(await byName("tf_mixed", "EQUALS"), []);
    assert.deepEqual(await byName("TF_MIXED", "EQUALS_IGNORE_CASE"), ["Tf_Mixed"]);
    assert.deepEqual(await byName("tf_", "STARTS_WITH"), ["tf_lower"]);
    assert.deepEqual(await byName("TF_", "STARTS_WITH_IGNORE_CASE"), ["Tf_Mixed", "tf_lower"]);
    assert.deepEqual(await byName("tf%", "STARTS_WITH"), ["tf%pct"]);
    assert.deepEqual(await byName("t%", "STARTS_WITH_IGNORE_CASE"), []);
    assert.deepEqual(await byName("tf", "STARTS_WITH"), ["tfXlower", "tf%pct", "tf_lower"].sort());
  });

  it("projects: total_result per organization after creates and deletes", async () => {
    const org = await addOrg(platform, "Project Count Org");
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await rest("POST", `${PROJECTS}?ctx.org_id=${org}`, { json: { name: `count-p-${i}` } });
      assert.equal(r.status, 201, r.text);
      ids.push(r.json.details.id);
    }
    const total = async (query: string) => {
      const r = await rest("POST", `${PROJECTS}/_search${query}`, { json: [] });
      assert.equal(r.status, 200, r.text);
      return Number(r.json.details.total_result);
    };
    const all = await total("?query.limit=1");
    assert.equal(await total(`?ctx.org_id=${org}&query.limit=1`), 4);
    const removed = await rest("DELETE", `${PROJECTS}/${ids[1]}`);
    assert.equal(removed.status, 200, removed.text);
    assert.equal(await total(`?ctx.org_id=${org}&query.limit=1`), 3);
    assert.equal(await total("?query.limit=1"), all - 1);
  });
});
