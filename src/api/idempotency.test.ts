import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import { toBinary } from "@bufbuild/protobuf";
import { Code, type ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import {
  ADMIN_PASSWORD,
  addMachineUser,
  assertRejected,
  assertRpcError,
  eventCount,
  type Json,
  type RestOptions,
  type RestReply,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../test/helpers.ts";
import { testTime } from "../../test/time.ts";
import {
  CreateOrganizationResponseSchema,
  PlatformOrganizations,
} from "../gen/platform/resources/organization/v3alpha/organization_service_pb.ts";
import { IdempotencyStore } from "../storage/idempotency.ts";

const ORGS = "/resources/v3alpha/organizations";

let counter = 0;
/** A fresh key per use, as clients should make them (random, e.g. a UUID). */
const newKey = () => `${crypto.randomUUID()}-${++counter}`;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("Idempotency-Key", () => {
  let platform: TestPlatform;
  let owner: string;
  let other: { userId: string; token: string };
  const rest = restClient(
    () => platform,
    () => owner,
  );
  const withKey = (key: string, options: RestOptions = {}): RestOptions => ({
    ...options,
    headers: { ...options.headers, "idempotency-key": key },
  });
  /** Organizations named so (the read model: what exists). */
  const orgsNamed = async (name: string) =>
    (await platform.db.query<{ id: string }>("SELECT id FROM orgs WHERE name = $1", [name])).map((r) => r.id);
  const keyRows = async () =>
    Number((await platform.db.query<{ n: number }>("SELECT count(*)::int AS n FROM idempotency_keys"))[0].n);
  /** A retry as a client makes it: again while the first request is still in progress. */
  const retry = async (path: string, options: RestOptions) => {
    for (let attempt = 0; ; attempt++) {
      const reply = await rest("POST", path, options);
      if (reply.status !== 409 || reply.json.code !== Code.Aborted || attempt > 200) return reply;
      await sleep(10);
    }
  };

  before(async () => {
    platform = await startPlatform({ listen: true });
    ({ token: owner } = await addMachineUser(platform, {
      username: "idem-owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    other = await addMachineUser(platform, {
      username: "idem-other",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
  });
  after(() => platform.stop());

  /**
   * Sends a create over a raw connection and cuts it without reading any answer: right after sending, or
   * (`afterCommit`) once the server has committed the create, before the client read a byte.
   */
  const createAndDrop = async (key: string, body: string, afterCommit: boolean) => {
    const port = Number(new URL(platform.url).port);
    const before = await eventCount(platform);
    const socket = net.connect(port, "127.0.0.1");
    await new Promise<void>((resolve, reject) => {
      socket.on("error", reject);
      socket.write(
        [
          `POST ${ORGS} HTTP/1.1`,
          `Host: localhost:${port}`,
          `Authorization: Bearer ${owner}`,
          "Content-Type: application/json",
          `Idempotency-Key: ${key}`,
          `Content-Length: ${Buffer.byteLength(body)}`,
          "",
          body,
        ].join("\r\n"),
        () => resolve(),
      );
    });
    if (afterCommit) {
      for (let i = 0; i < testTime(500) && (await eventCount(platform)) === before; i++) await sleep(5);
      assert.ok((await eventCount(platform)) > before, "the create was applied");
    }
    socket.destroy();
  };

  it("a create whose connection dropped, retried with the same key, yields one resource and the same answer", async () => {
    for (const afterCommit of [true, false]) {
      const key = newKey();
      const name = `Dropped Connection Org ${afterCommit}`;
      const body = JSON.stringify({ name });
      await createAndDrop(key, body, afterCommit);
      const first = await retry(ORGS, withKey(key, { body }));
      assert.equal(first.status, 201, first.text);
      const applied = await eventCount(platform);
      // Cut right after sending, the server may or may not have received the request: either way the
      // retry is answered as the one request it is; once applied, it is a replay.
      if (afterCommit) assert.equal(first.headers["idempotent-replayed"], "true");
      const second = await retry(ORGS, withKey(key, { body }));
      assert.equal(second.status, 201);
      assert.equal(second.headers["idempotent-replayed"], "true");
      assert.equal(second.text, first.text, "the same answer every time");
      assert.deepEqual(await orgsNamed(name), [first.json.details.id], "one organization");
      assert.equal(await eventCount(platform), applied, "retries store nothing");
      // Without the key the same create is a new request: the name is taken.
      assertRpcError(await rest("POST", ORGS, { body }), 409, Code.AlreadyExists);
    }
  });

  it("answers the first answer to a retry, marked as replayed; calls without the key are unaffected", async () => {
    const key = newKey();
    const created = await rest("POST", ORGS, withKey(key, { json: { name: "Replayed Org" } }));
    assert.equal(created.status, 201, created.text);
    assert.equal(created.headers["idempotent-replayed"], undefined, "the first answer is no replay");
    const count = await eventCount(platform);
    const again = await rest("POST", ORGS, withKey(key, { json: { name: "Replayed Org" } }));
    assert.equal(again.status, 201);
    assert.equal(again.headers["idempotent-replayed"], "true");
    assert.equal(again.text, created.text);
    assert.equal(await eventCount(platform), count);

    // A delete retried with its key answers its first 200 again instead of 404.
    const deleteKey = newKey();
    const deleted = await rest("DELETE", `${ORGS}/${created.json.details.id}`, withKey(deleteKey));
    assert.equal(deleted.status, 200, deleted.text);
    const deletedAgain = await rest("DELETE", `${ORGS}/${created.json.details.id}`, withKey(deleteKey));
    assert.equal(deletedAgain.status, 200, deletedAgain.text);
    assert.equal(deletedAgain.text, deleted.text);
    assertRpcError(await rest("DELETE", `${ORGS}/${created.json.details.id}`), 404, Code.NotFound);
  });

  it("the same key with another request answers 422 and stores nothing", async () => {
    const key = newKey();
    const created = await rest("POST", ORGS, withKey(key, { json: { name: "Key Reuse Org" } }));
    assert.equal(created.status, 201);
    const rows = await keyRows();
    await assertRejected(
      platform,
      () => rest("POST", ORGS, withKey(key, { json: { name: "Key Reuse Org 2" } })),
      422,
      Code.FailedPrecondition,
      "Idempotency-Key: already used for a different request",
    );
    // another method with the same key is another request too
    await assertRejected(
      platform,
      () => rest("PATCH", `${ORGS}/${created.json.details.id}`, withKey(key, { json: { name: "Renamed" } })),
      422,
      Code.FailedPrecondition,
      "Idempotency-Key:",
    );
    assert.equal(await keyRows(), rows);
    assert.deepEqual(await orgsNamed("Key Reuse Org 2"), []);
    // the first request still replays
    const again = await rest("POST", ORGS, withKey(key, { json: { name: "Key Reuse Org" } }));
    assert.equal(again.text, created.text);
  });

  it("keys are per caller: another caller's same key is an independent request", async () => {
    const key = newKey();
    const mine = await rest("POST", ORGS, withKey(key, { json: { name: "Caller A Org" } }));
    assert.equal(mine.status, 201);
    // My key and my request are no replay of my answer for them: it runs (and the name is taken)...
    assertRpcError(
      await rest("POST", ORGS, withKey(key, { token: other.token, json: { name: "Caller A Org" } })),
      409,
      Code.AlreadyExists,
    );
    // ...and my key with another request is no reuse for them: it creates.
    const theirs = await rest(
      "POST",
      ORGS,
      withKey(key, { token: other.token, json: { name: "Caller B Org" } }),
    );
    assert.equal(theirs.status, 201, theirs.text);
    assert.equal(theirs.headers["idempotent-replayed"], undefined);
    assert.notEqual(theirs.json.details.id, mine.json.details.id);
    // each caller's retry replays their own answer
    assert.equal(
      (await rest("POST", ORGS, withKey(key, { json: { name: "Caller A Org" } }))).text,
      mine.text,
    );
    assert.equal(
      (await rest("POST", ORGS, withKey(key, { token: other.token, json: { name: "Caller B Org" } }))).text,
      theirs.text,
    );
  });

  it("replays across protocols: REST, gRPC and Connect send the same request under one key", async () => {
    const key = newKey();
    const created = await rest("POST", ORGS, withKey(key, { json: { name: "Cross Protocol Org" } }));
    assert.equal(created.status, 201);
    const count = await eventCount(platform);
    const headers = { authorization: `Bearer ${owner}`, "idempotency-key": key };
    for (const transport of [
      createGrpcTransport({ baseUrl: platform.url }),
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
    ]) {
      const client = createClient(PlatformOrganizations, transport);
      let replayed: string | null = null;
      const res = await client.createOrganization(
        { organization: { name: "Cross Protocol Org" } },
        { headers, onHeader: (h) => (replayed = h.get("idempotent-replayed")) },
      );
      assert.equal(res.details?.id, created.json.details.id);
      assert.equal(res.details?.sequence.toString(), created.json.details.sequence);
      assert.equal(replayed, "true");
    }
    assert.equal(await eventCount(platform), count);

    // a first call over gRPC replays over gRPC with the identical message
    const grpc = createClient(PlatformOrganizations, createGrpcTransport({ baseUrl: platform.url }));
    const grpcKey = newKey();
    const grpcHeaders = { authorization: `Bearer ${owner}`, "idempotency-key": grpcKey };
    const first = await grpc.createOrganization(
      { organization: { name: "gRPC Org" } },
      { headers: grpcHeaders },
    );
    const second = await grpc.createOrganization(
      { organization: { name: "gRPC Org" } },
      { headers: grpcHeaders },
    );
    assert.deepEqual(
      toBinary(CreateOrganizationResponseSchema, second),
      toBinary(CreateOrganizationResponseSchema, first),
    );
    await assert.rejects(
      grpc.createOrganization({ organization: { name: "gRPC Org 2" } }, { headers: grpcHeaders }),
      (e: ConnectError) => e.code === Code.FailedPrecondition && e.rawMessage.startsWith("Idempotency-Key:"),
    );
    await assert.rejects(
      grpc.createOrganization(
        { organization: { name: "gRPC Org 3" } },
        { headers: { ...grpcHeaders, "idempotency-key": "k".repeat(256) } },
      ),
      (e: ConnectError) => e.code === Code.InvalidArgument && e.rawMessage.startsWith("Idempotency-Key:"),
    );
    assert.deepEqual(await orgsNamed("gRPC Org"), [first.details?.id]);
  });

  it("rejects a malformed key with 400 naming the header, before anything is stored", async () => {
    for (const key of ["k".repeat(256), "", "has space", "tab\tin"]) {
      await assertRejected(
        platform,
        () => rest("POST", ORGS, withKey(key, { json: { name: "Bad Key Org" } })),
        400,
        Code.InvalidArgument,
        "Idempotency-Key: must be 1 to 255 visible ASCII characters",
      );
    }
    const longest = await rest("POST", ORGS, withKey("k".repeat(255), { json: { name: "Long Key Org" } }));
    assert.equal(longest.status, 201, longest.text);
  });

  it("a concurrent twin: one request runs, the other answers in progress or the replay", async () => {
    for (let round = 0; round < 3; round++) {
      const key = newKey();
      const name = `Twin Org ${round}`;
      const replies = await Promise.all(
        [0, 1, 2].map(() => rest("POST", ORGS, withKey(key, { json: { name } }))),
      );
      const created = replies.filter((r) => r.status === 201);
      const fresh = created.filter((r) => r.headers["idempotent-replayed"] === undefined);
      assert.equal(fresh.length, 1, replies.map((r) => r.text).join("\n"));
      for (const r of created) assert.equal(r.text, fresh[0].text);
      for (const r of replies.filter((r) => r.status !== 201)) {
        assertRpcError(r, 409, Code.Aborted, "a request with this Idempotency-Key is in progress");
      }
      assert.deepEqual(await orgsNamed(name), [fresh[0].json.details.id]);
    }
  });

  it("stores an error that followed a write: a wrong password is not counted twice", async () => {
    const adminId = platform.bootstrapResult!.adminUserId;
    const key = newKey();
    const body = { checks: { user: { user_id: adminId }, password: { password: "wrong password" } } };
    const failures = async () =>
      Number(
        (
          await platform.db.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM events WHERE aggregate_id = $1 AND event_type = 'user.password.check.failed'",
            [adminId],
          )
        )[0].n,
      );
    const before = await failures();
    const first = await rest("POST", "/resources/v3alpha/sessions", withKey(key, { json: body }));
    assertRpcError(first, 400, Code.InvalidArgument, "password is wrong");
    assert.equal(await failures(), before + 1);
    const again = await rest("POST", "/resources/v3alpha/sessions", withKey(key, { json: body }));
    assertRpcError(again, 400, Code.InvalidArgument, "password is wrong");
    assert.equal(again.headers["idempotent-replayed"], "true");
    assert.equal(await failures(), before + 1, "the retry did not check the password again");
    // the right password under a new key works
    const ok = await rest(
      "POST",
      "/resources/v3alpha/sessions",
      withKey(newKey(), {
        json: { checks: { user: { user_id: adminId }, password: { password: ADMIN_PASSWORD } } },
      }),
    );
    assert.equal(ok.status, 201, ok.text);
  });

  it("calls that write nothing leave no key: rejected input, denied calls and reads run again", async () => {
    const rows = await keyRows();
    const key = newKey();
    // validation fails before the key is looked at
    assertRpcError(await rest("POST", ORGS, withKey(key, { json: { name: "" } })), 400, Code.InvalidArgument);
    // a caller without the permission: 403, no key
    const { token: nobody } = await addMachineUser(platform, { username: "idem-nobody" });
    assertRpcError(
      await rest("POST", ORGS, withKey(key, { token: nobody, json: { name: "Denied Org" } })),
      403,
      Code.PermissionDenied,
    );
    // reads ignore the header, even a malformed one
    const got = await rest("GET", `${ORGS}/_instance_default`, withKey("bad key"));
    assert.equal(got.status, 200, got.text);
    const searched = await rest("POST", `${ORGS}/_search`, withKey(key, { json: [] }));
    assert.equal(searched.status, 200, searched.text);
    // and a call without the header stores no key either
    assert.equal((await rest("POST", ORGS, { json: { name: "No Key Org" } })).status, 201);
    assert.equal(await keyRows(), rows);
    // so the key is still free for a write
    const created = await rest("POST", ORGS, withKey(key, { json: { name: "Free Key Org" } }));
    assert.equal(created.status, 201, created.text);
    assert.equal(created.headers["idempotent-replayed"], undefined);
  });

  it("keeps answers sealed: a PAT's token is not readable from the database, yet replays", async () => {
    const key = newKey();
    const path = `/resources/v3alpha/users/${other.userId}/pats`;
    const created = await rest("POST", path, withKey(key, { json: {} }));
    assert.equal(created.status, 201, created.text);
    const token = created.json.token as string;
    const rows = await platform.db.query<Json>("SELECT * FROM idempotency_keys");
    const dump = JSON.stringify(rows);
    assert.ok(!dump.includes(token), "the token is not stored in plain text");
    assert.ok(!dump.includes(Buffer.from(token).toString("base64")));
    assert.ok(!dump.includes(key), "nor the key");
    const again = await rest("POST", path, withKey(key, { json: {} }));
    assert.equal(again.json.token, token);
    // A changed answer is detected (AES-GCM), never replayed.
    const row = rows.find((r: Json) => String(r.method).endsWith("/CreatePersonalAccessToken"));
    await platform.db.query("UPDATE idempotency_keys SET response = $1 WHERE key_hash = $2", [
      [...row.response].reverse().join(""),
      row.key_hash,
    ]);
    assertRpcError(
      await rest("POST", path, withKey(key, { json: {} })),
      500,
      Code.Internal,
      "the stored answer of this Idempotency-Key cannot be read",
    );
  });

  it("a key whose call applied without storing its answer: in progress while its process runs, then answer lost naming the resource", async () => {
    const key = newKey();
    const created = await rest("POST", ORGS, withKey(key, { json: { name: "Lost Answer Org" } }));
    assert.equal(created.status, 201);
    const id = created.json.details.id as string;
    const retry = () => rest("POST", ORGS, withKey(key, { json: { name: "Lost Answer Org" } }));
    const assertLost = (lost: RestReply) => {
      assertRpcError(lost, 409, Code.FailedPrecondition, "the request with this Idempotency-Key was applied");
      assert.ok(lost.json.message.includes(id), lost.json.message);
    };
    // as if another process, still running, had claimed it just now and not answered yet
    const other = new IdempotencyStore(platform.db);
    const lease = await other.holdLease();
    try {
      await platform.db.query(
        "UPDATE idempotency_keys SET response = NULL, claimed_by = $2, claimed_at = now() WHERE resource_id = $1",
        [id, other.processId],
      );
      assertRpcError(await retry(), 409, Code.Aborted, "a request with this Idempotency-Key is in progress");
      // no call runs that long: its answer was lost even though the process runs
      await platform.db.query(
        "UPDATE idempotency_keys SET claimed_at = now() - interval '5 minutes' WHERE resource_id = $1",
        [id],
      );
      assertLost(await retry());
      await platform.db.query("UPDATE idempotency_keys SET claimed_at = now() WHERE resource_id = $1", [id]);
      assertRpcError(await retry(), 409, Code.Aborted, "a request with this Idempotency-Key is in progress");
    } finally {
      await lease.release();
    }
    // that process has ended (crashed right after its commit): the answer is lost, at once
    assertLost(await retry());
    // a process that never held a lease (a process of another run) is not running either
    await platform.db.query(
      "UPDATE idempotency_keys SET claimed_by = 'another-process', claimed_at = now() WHERE resource_id = $1",
      [id],
    );
    assertLost(await retry());
    assert.deepEqual(await orgsNamed("Lost Answer Org"), [id]);
  });

  it("keys expire after 24 hours: the request then runs again, and expired rows are purged", async () => {
    const key = newKey();
    const created = await rest("POST", ORGS, withKey(key, { json: { name: "Expiring Org" } }));
    assert.equal(created.status, 201);
    // 24 h later
    await platform.db.query(
      "UPDATE idempotency_keys SET claimed_at = claimed_at - interval '24 hours', expires_at = expires_at - interval '24 hours' WHERE resource_id = $1",
      [created.json.details.id],
    );
    // the same request runs again (the name is taken now)...
    assertRpcError(
      await rest("POST", ORGS, withKey(key, { json: { name: "Expiring Org" } })),
      409,
      Code.AlreadyExists,
    );
    // ...and another one with the key is no reuse: it takes the key over
    const renamed = await rest("POST", ORGS, withKey(key, { json: { name: "Expiring Org 2" } }));
    assert.equal(renamed.status, 201, renamed.text);
    assert.equal(
      (await rest("POST", ORGS, withKey(key, { json: { name: "Expiring Org 2" } }))).text,
      renamed.text,
    );

    await platform.db.query(
      "UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE resource_id = $1",
      [renamed.json.details.id],
    );
    const rows = await keyRows();
    assert.equal(await new IdempotencyStore(platform.db).purgeExpired(true), 1);
    assert.equal(await keyRows(), rows - 1);
  });

  it("the TTL is the store's: rows expire that long after their claim, then the key is free", async () => {
    const store = new IdempotencyStore(platform.db, { ttlMs: 90_000 });
    const id = { instanceId: "i", caller: "user:test", keyHash: newKey() };
    assert.equal(await platform.db.transaction((tx) => store.claim(tx, id, "/m", "f")), true);
    const [row] = await platform.db.query<{ ms: number }>(
      "SELECT (extract(epoch FROM expires_at - claimed_at) * 1000)::int AS ms FROM idempotency_keys WHERE key_hash = $1",
      [id.keyHash],
    );
    assert.equal(Number(row.ms), 90_000);
    assert.ok(await store.find(id));
    assert.equal(await platform.db.transaction((tx) => store.claim(tx, id, "/m", "f")), false, "taken");
    await platform.db.query("UPDATE idempotency_keys SET expires_at = now() WHERE key_hash = $1", [
      id.keyHash,
    ]);
    assert.equal(await store.find(id), undefined);
    assert.equal(await platform.db.transaction((tx) => store.claim(tx, id, "/m", "g")), true, "taken over");
    assert.equal((await store.find(id))?.fingerprint, "g");
  });
});
