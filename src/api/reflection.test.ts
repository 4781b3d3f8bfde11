import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { create, fromBinary, getExtension, hasExtension, toBinary } from "@bufbuild/protobuf";
import {
  type FileDescriptorProto,
  FileDescriptorProtoSchema,
  FileDescriptorSetSchema,
} from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { addMachineUser, restClient, startPlatform, type TestPlatform } from "../../test/helpers.ts";
import { http } from "../gen/google/api/annotations_pb.ts";

/*
 * A stock gRPC client (@grpc/grpc-js) with the official reflection protos, over h2c to a listening Platform,
 * as grpcurl and Postman use it: one bidirectional stream, a request, its answer, the next request.
 */

const PROTO_DIR = path.resolve(import.meta.dirname, "../../proto");
const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

// biome-ignore lint/suspicious/noExplicitAny: proto-loader builds clients and messages dynamically
type Dynamic = any;

const reflectionPackage = grpc.loadPackageDefinition(
  protoLoader.loadSync(["grpc/reflection/v1/reflection.proto", "grpc/reflection/v1alpha/reflection.proto"], {
    ...LOADER_OPTIONS,
    includeDirs: [PROTO_DIR],
  }),
) as Dynamic;

/** One reflection stream: `ask` sends a request and resolves with its answer. */
function reflectionStream(version: "v1" | "v1alpha", address: string, metadata = new grpc.Metadata()) {
  const Client = reflectionPackage.grpc.reflection[version].ServerReflection;
  const client = new Client(address, grpc.credentials.createInsecure());
  const call = client.ServerReflectionInfo(metadata);
  const waiting: Array<{ resolve: (m: Dynamic) => void; reject: (e: Error) => void }> = [];
  call.on("data", (message: Dynamic) => waiting.shift()?.resolve(message));
  call.on("error", (error: Error) => {
    for (const w of waiting.splice(0)) w.reject(error);
  });
  return {
    ask(request: Dynamic): Promise<Dynamic> {
      return new Promise((resolve, reject) => {
        waiting.push({ resolve, reject });
        call.write(request);
      });
    },
    close() {
      call.end();
      client.close();
    },
  };
}

const decode = (answer: Dynamic): FileDescriptorProto[] => {
  assert.equal(answer.message_response, "file_descriptor_response", JSON.stringify(answer.error_response));
  return answer.file_descriptor_response.file_descriptor_proto.map((bytes: Uint8Array) =>
    fromBinary(FileDescriptorProtoSchema, bytes),
  );
};

/** Every import of every returned file is returned too (a self-contained set, the asked-for file first). */
function assertClosed(files: FileDescriptorProto[], first: string) {
  assert.equal(files[0].name, first);
  const names = new Set(files.map((f) => f.name));
  assert.equal(names.size, files.length, "no file twice");
  for (const f of files) for (const d of f.dependency) assert.ok(names.has(d), `${f.name} imports ${d}`);
}

describe("gRPC server reflection", () => {
  let platform: TestPlatform;
  let address: string;

  before(async () => {
    platform = await startPlatform({ listen: true });
    address = new URL(platform.url).host;
  });
  after(() => platform.stop());

  for (const version of ["v1", "v1alpha"] as const) {
    it(`${version}: lists the services and describes them without a token, on one stream`, async () => {
      const stream = reflectionStream(version, address);
      try {
        const listed = await stream.ask({ host: "", list_services: "" });
        assert.equal(listed.message_response, "list_services_response");
        const names = listed.list_services_response.service.map((s: { name: string }) => s.name);
        for (const name of [
          "platform.resources.user.v3alpha.PlatformUsers",
          "platform.resources.membership.v3alpha.PlatformMemberships",
          "platform.settings.language.v3alpha.PlatformLanguageSettings",
          "grpc.reflection.v1.ServerReflection",
          "grpc.reflection.v1alpha.ServerReflection",
        ])
          assert.ok(names.includes(name), `${name} in ${names}`);
        assert.ok(!names.some((n: string) => n.startsWith("platform.testing.")), "no test services");
        assert.deepEqual(listed.original_request.list_services, "");

        // The service → its file and every file it imports; the methods are there.
        const users = decode(
          await stream.ask({ file_containing_symbol: "platform.resources.user.v3alpha.PlatformUsers" }),
        );
        assertClosed(users, "platform/resources/user/v3alpha/user_service.proto");
        const service = users[0].service.find((s) => s.name === "PlatformUsers");
        assert.ok(service);
        for (const method of ["CreateUser", "GetUser", "SearchUsers", "SetPassword"])
          assert.ok(
            service.method.some((m) => m.name === method),
            method,
          );
        // Options are as compiled, custom ones included (the REST rule of GetUser).
        const getUser = service.method.find((m) => m.name === "GetUser");
        assert.ok(getUser?.options && hasExtension(getUser.options, http));
        assert.deepEqual(getExtension(getUser.options, http).pattern, {
          case: "get",
          value: "/resources/v3alpha/users/{id}",
        });
        for (const dependency of [
          "google/api/annotations.proto",
          "google/protobuf/descriptor.proto",
          "platform/object/v3alpha/object.proto",
        ])
          assert.ok(
            users.some((f) => f.name === dependency),
            dependency,
          );

        // Methods, messages (nested too), enums (nested too), enum values and fields name their file.
        for (const [symbol, file] of [
          [
            "platform.resources.user.v3alpha.PlatformUsers.GetUser",
            "platform/resources/user/v3alpha/user_service.proto",
          ],
          [
            "platform.resources.user.v3alpha.GetUserRequest",
            "platform/resources/user/v3alpha/user_service.proto",
          ],
          [
            "platform.resources.user.v3alpha.User.MetadataEntry",
            "platform/resources/user/v3alpha/user_service.proto",
          ],
          [
            ".platform.resources.user.v3alpha.UserState",
            "platform/resources/user/v3alpha/user_service.proto",
          ],
          ["platform.object.v3alpha.Details", "platform/object/v3alpha/object.proto"],
          ["platform.object.v3alpha.OwnerType", "platform/object/v3alpha/object.proto"],
          ["google.protobuf.FieldDescriptorProto.Type", "google/protobuf/descriptor.proto"],
          ["google.protobuf.FieldDescriptorProto.TYPE_STRING", "google/protobuf/descriptor.proto"],
          ["google.protobuf.Timestamp.seconds", "google/protobuf/timestamp.proto"],
          ["google.api.http", "google/api/annotations.proto"],
          [`grpc.reflection.${version}.ServerReflection`, `grpc/reflection/${version}/reflection.proto`],
        ])
          assertClosed(decode(await stream.ask({ file_containing_symbol: symbol })), file);
        assertClosed(
          decode(await stream.ask({ file_by_filename: "platform/object/v3alpha/object.proto" })),
          "platform/object/v3alpha/object.proto",
        );
      } finally {
        stream.close();
      }
    });

    it(`${version}: extensions, and NOT_FOUND in error_response for unknown names`, async () => {
      const stream = reflectionStream(version, address);
      try {
        const http = await stream.ask({
          file_containing_extension: {
            containing_type: "google.protobuf.MethodOptions",
            extension_number: 72295728,
          },
        });
        assertClosed(decode(http), "google/api/annotations.proto");
        const rules = await stream.ask({
          file_containing_extension: {
            containing_type: "google.protobuf.FieldOptions",
            extension_number: 51001,
          },
        });
        assertClosed(decode(rules), "platform/validate/v1/validate.proto");

        const numbers = await stream.ask({ all_extension_numbers_of_type: "google.protobuf.MethodOptions" });
        assert.equal(numbers.message_response, "all_extension_numbers_response");
        assert.deepEqual(numbers.all_extension_numbers_response, {
          base_type_name: "google.protobuf.MethodOptions",
          extension_number: [72295728],
        });
        const none = await stream.ask({ all_extension_numbers_of_type: "platform.object.v3alpha.Details" });
        assert.deepEqual(none.all_extension_numbers_response.extension_number, []);

        for (const request of [
          { file_containing_symbol: "platform.resources.user.v3alpha.NoSuchThing" },
          { file_containing_symbol: "platform.resources.user.v3alpha.PlatformUsers.NoSuchMethod" },
          { file_by_filename: "platform/nothing.proto" },
          {
            file_containing_extension: {
              containing_type: "google.protobuf.MethodOptions",
              extension_number: 1,
            },
          },
          { file_containing_extension: { containing_type: "no.Such", extension_number: 72295728 } },
          { all_extension_numbers_of_type: "no.Such" },
        ]) {
          const answer = await stream.ask(request);
          assert.equal(answer.message_response, "error_response", JSON.stringify(request));
          assert.equal(answer.error_response.error_code, grpc.status.NOT_FOUND);
          assert.match(answer.error_response.error_message, /not found/);
        }
        const empty = await stream.ask({});
        assert.equal(empty.error_response.error_code, grpc.status.INVALID_ARGUMENT);
        // The stream still answers after errors.
        assert.equal((await stream.ask({ list_services: "*" })).message_response, "list_services_response");
      } finally {
        stream.close();
      }
    });
  }

  it("the returned descriptors are enough for a client to build the service and call it", async () => {
    const { userId, token } = await addMachineUser(platform, {
      username: "reflected",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
    const stream = reflectionStream("v1", address);
    let files: FileDescriptorProto[];
    try {
      files = decode(
        await stream.ask({ file_containing_symbol: "platform.resources.user.v3alpha.PlatformUsers" }),
      );
    } finally {
      stream.close();
    }
    // No .proto file on the client's side: the package definition comes from the reflected descriptors.
    const set = toBinary(FileDescriptorSetSchema, create(FileDescriptorSetSchema, { file: files }));
    const loaded = grpc.loadPackageDefinition(
      protoLoader.loadFileDescriptorSetFromBuffer(Buffer.from(set), LOADER_OPTIONS),
    ) as Dynamic;
    const Users = loaded.platform.resources.user.v3alpha.PlatformUsers;
    const client = new Users(address, grpc.credentials.createInsecure());
    try {
      const metadata = new grpc.Metadata();
      metadata.set("authorization", `Bearer ${token}`);
      const got: Dynamic = await new Promise((resolve, reject) =>
        client.GetUser({ id: userId }, metadata, (error: Error | null, response: Dynamic) =>
          error ? reject(error) : resolve(response),
        ),
      );
      assert.equal(got.user.username, "reflected");
      assert.equal(got.user.details.id, userId);
      assert.equal(got.user.type, "machine");
      // Authentication still applies to the services themselves.
      const denied: Dynamic = await new Promise((resolve) =>
        client.GetUser({ id: userId }, new grpc.Metadata(), (error: Error | null) => resolve(error)),
      );
      assert.equal(denied?.code, grpc.status.UNAUTHENTICATED);
    } finally {
      client.close();
    }
  });

  it("answers on any Host and whatever Authorization says; no REST route, no OpenAPI entry, no execution target", async () => {
    const port = new URL(platform.url).port;
    const metadata = new grpc.Metadata();
    metadata.set("authorization", "Bearer not-a-token");
    // 127.0.0.1 is no instance's domain (the API answers 404 there), yet reflection answers.
    const stream = reflectionStream("v1", `127.0.0.1:${port}`, metadata);
    try {
      const listed = await stream.ask({ list_services: "" });
      assert.equal(listed.message_response, "list_services_response");
    } finally {
      stream.close();
    }
    const { token } = await addMachineUser(platform, {
      username: "reflection-owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
    const rest = restClient(
      () => platform,
      () => token,
    );
    const openapi = await rest("GET", "/openapi.json");
    assert.equal(openapi.status, 200);
    assert.doesNotMatch(openapi.text, /grpc\.reflection|ServerReflection/);
    const services = await rest("GET", "/resources/v3alpha/executions/services");
    assert.equal(services.status, 200, services.text);
    assert.ok(services.json.services.includes("platform.resources.user.v3alpha.PlatformUsers"));
    assert.ok(!services.json.services.some((s: string) => s.startsWith("grpc.reflection")));
    const methods = await rest("GET", "/resources/v3alpha/executions/methods");
    assert.ok(!methods.json.methods.some((m: string) => m.includes("ServerReflection")));
  });
});
