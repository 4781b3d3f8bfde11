/**
 * Links between users and external identities (`user.idp.link.added` / `.removed` on the user): listed and
 * removed through the users API (GET /users/{id}/links, DELETE /users/{id}/links/{idp_id}). The links are
 * made here through the domain (the login UI makes them after a sign-in with a provider; test/idp-login
 * shows that end to end). A link to a provider that does not exist (deleted since) is listed all the same.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  addMachineUser,
  addOrg,
  assertRejected,
  eventCount,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { addHuman } from "../../../test/login.ts";
import { foldUser, removeUserEvent } from "../../domain/user/commands.ts";
import { USER } from "../../domain/user/events.ts";
import { addIdpLinkEvents, idpLinkAddedEvent } from "../../domain/user/idp-links.ts";
import { AlreadyExistsError } from "../../errors.ts";
import { PlatformUsers } from "../../gen/platform/resources/user/v3alpha/user_service_pb.ts";

const USERS = "/resources/v3alpha/users";

describe("user links to external identities", () => {
  let platform: TestPlatform;
  let owner: string;
  let instanceId: string;
  let aliceId: string;
  let bobId: string;

  const rest = restClient(
    () => platform,
    () => owner,
  );

  /** Links the identity to the user through the domain command (as the login UI does). */
  const link = (userId: string, idpId: string, externalId: string, username = `${externalId}-name`) =>
    platform.eventStore.push({ instanceId, creator: "test" }, async (tx) => {
      const user = foldUser(await tx.load(USER, userId));
      assert.ok(user);
      return addIdpLinkEvents(user, {
        idp_id: idpId,
        external_user_id: externalId,
        external_username: username,
      });
    });

  before(async () => {
    platform = await startPlatform({ listen: true });
    instanceId = platform.bootstrapResult!.instanceId;
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    aliceId = await addHuman(platform, "alice", "Password1!");
    bobId = await addHuman(platform, "bob", "Password1!");
  });
  after(() => platform.stop());

  it("lists a user's links, oldest first, also those of providers that do not exist (any more)", async () => {
    const empty = await rest("GET", `${USERS}/${aliceId}/links`);
    assert.equal(empty.status, 200, empty.text);
    assert.deepEqual(empty.json.links ?? [], []);

    await link(aliceId, "idp-one", "ext-1", "alice-at-one");
    await link(aliceId, "deleted-idp", "ext-9", "alice-at-gone");
    const listed = await rest("GET", `${USERS}/${aliceId}/links`);
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(
      listed.json.links.map((l: Record<string, string>) => [
        l.idp_id,
        l.external_user_id,
        l.external_username,
      ]),
      [
        ["idp-one", "ext-1", "alice-at-one"],
        ["deleted-idp", "ext-9", "alice-at-gone"],
      ],
    );
    const [first] = listed.json.links;
    assert.equal(first.details.id, "idp-one");
    assert.equal(first.details.resource_owner.id, platform.bootstrapResult!.orgId);
    assert.ok(first.details.change_date);

    // over gRPC too
    const grpc = createClient(
      PlatformUsers,
      createGrpcTransport({
        baseUrl: platform.url,
        interceptors: [
          (next) => (req) => {
            req.header.set("authorization", `Bearer ${owner}`);
            return next(req);
          },
        ],
      }),
    );
    const answer = await grpc.listUserLinks({ id: aliceId });
    assert.deepEqual(
      answer.links.map((l) => l.idpId),
      ["idp-one", "deleted-idp"],
    );
  });

  it("one external identity links to one user per instance, a user to one identity per provider", async () => {
    await link(bobId, "idp-two", "ext-2");
    const before = await eventCount(platform);
    await assert.rejects(link(aliceId, "idp-two", "ext-2"), AlreadyExistsError);
    await assert.rejects(link(bobId, "idp-two", "ext-3"), /linked to another identity of this provider/);
    // the same link again changes nothing
    await link(bobId, "idp-two", "ext-2");
    assert.equal(await eventCount(platform), before);
    // a user created together with its link claims the identity as well
    await assert.rejects(
      platform.eventStore.push({ instanceId, creator: "test" }, async () => [
        idpLinkAddedEvent(aliceId, platform.bootstrapResult!.orgId, {
          idp_id: "idp-two",
          external_user_id: "ext-2",
          external_username: "x",
        }),
      ]),
      AlreadyExistsError,
    );
  });

  it("DELETE removes the link; the identity can then be linked again (to another user)", async () => {
    await link(bobId, "idp-three", "ext-3");
    const removed = await rest("DELETE", `${USERS}/${bobId}/links/idp-three`);
    assert.equal(removed.status, 200, removed.text);
    assert.equal(removed.json.details.id, bobId);
    const listed = await rest("GET", `${USERS}/${bobId}/links`);
    assert.ok(!listed.json.links.some((l: Record<string, string>) => l.idp_id === "idp-three"));
    await link(aliceId, "idp-three", "ext-3");

    // no such link: 404, nothing stored
    await assertRejected(
      platform,
      () => rest("DELETE", `${USERS}/${bobId}/links/idp-three`),
      404,
      Code.NotFound,
      "link not found",
    );
    await assertRejected(
      platform,
      () => rest("DELETE", `${USERS}/unknown-user/links/idp-three`),
      404,
      Code.NotFound,
      "user not found",
    );
  });

  it("removing the user releases its identities", async () => {
    const carolId = await addHuman(platform, "carol", "Password1!");
    await link(carolId, "idp-four", "ext-4");
    await platform.eventStore.push({ instanceId, creator: "test" }, async (tx) => [
      removeUserEvent(foldUser(await tx.load(USER, carolId))!),
    ]);
    await link(aliceId, "idp-four", "ext-4");
    const listed = await rest("GET", `${USERS}/${aliceId}/links`);
    assert.ok(listed.json.links.some((l: Record<string, string>) => l.idp_id === "idp-four"));
  });

  it("reading needs user.read (else 404), removing user.write (else 403); a machine user has no links", async () => {
    await link(aliceId, "idp-five", "ext-5");
    const orgB = await addOrg(platform, "B");
    const { token: outsider } = await addMachineUser(platform, {
      username: "outsider",
      orgId: orgB,
      membership: { contextType: "org", contextId: orgB, roles: ["ORG_OWNER"] },
    });
    await assertRejected(
      platform,
      () => rest("GET", `${USERS}/${aliceId}/links`, { token: outsider }),
      404,
      Code.NotFound,
      "user not found",
    );
    await assertRejected(
      platform,
      () => rest("DELETE", `${USERS}/${aliceId}/links/idp-five`, { token: outsider }),
      404,
      Code.NotFound,
    );
    const { token: viewer } = await addMachineUser(platform, {
      username: "viewer",
      membership: {
        contextType: "org",
        contextId: platform.bootstrapResult!.orgId,
        roles: ["ORG_OWNER_VIEWER"],
      },
    });
    const read = await rest("GET", `${USERS}/${aliceId}/links`, { token: viewer });
    assert.equal(read.status, 200, read.text);
    await assertRejected(
      platform,
      () => rest("DELETE", `${USERS}/${aliceId}/links/idp-five`, { token: viewer }),
      403,
      Code.PermissionDenied,
    );
    await assertRejected(
      platform,
      () => rest("GET", `${USERS}/${aliceId}/links`, { token: null }),
      401,
      Code.Unauthenticated,
    );

    const { userId: machineId } = await addMachineUser(platform, { username: "robot" });
    const machineLinks = await rest("GET", `${USERS}/${machineId}/links`);
    assert.deepEqual(machineLinks.json.links ?? [], []);
    await assert.rejects(link(machineId, "idp-five", "ext-6"), /exist only for human users/);
  });

  it("validates the path: id and idp_id of at most 200 characters", async () => {
    await assertRejected(
      platform,
      () => rest("DELETE", `${USERS}/${aliceId}/links/${"x".repeat(201)}`),
      400,
      Code.InvalidArgument,
      /idp_id/,
    );
    await assertRejected(
      platform,
      () => rest("GET", `${USERS}/${"x".repeat(201)}/links`),
      400,
      Code.InvalidArgument,
      /id/,
    );
  });
});
