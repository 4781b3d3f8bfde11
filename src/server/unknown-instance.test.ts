import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { rawRequest, startPlatform, type TestPlatform } from "../../test/helpers.ts";
import { PlatformLanguageSettings } from "../gen/platform/settings/language/v3alpha/language_service_pb.ts";

describe("a host that is no instance", () => {
  let platform: TestPlatform;
  before(async () => {
    platform = await startPlatform({ listen: true });
  });
  after(() => platform?.stop());

  it('answers gRPC and gRPC-web calls with status 5 (NOT_FOUND) "instance not found" in trailers', async () => {
    // 127.0.0.1 is not a domain of the first instance (localhost).
    const baseUrl = `http://127.0.0.1:${new URL(platform.url).port}`;
    for (const transport of [
      createGrpcTransport({ baseUrl }),
      createGrpcWebTransport({ baseUrl, httpVersion: "1.1" }),
    ]) {
      const languages = createClient(PlatformLanguageSettings, transport);
      await assert.rejects(languages.resolveLanguages({}), (error) => {
        assert.ok(error instanceof ConnectError, String(error));
        assert.equal(error.code, Code.NotFound);
        assert.equal(error.rawMessage, "instance not found");
        return true;
      });
    }
  });

  it("answers REST calls with 404 and an rpcStatus body", async () => {
    const r = await rawRequest(`${platform.url}/settings/v3alpha/languages`, {
      headers: { host: "nowhere.example" },
    });
    assert.equal(r.status, 404);
    assert.deepEqual(JSON.parse(r.body), { code: 5, message: "instance not found", details: [] });
  });
});
