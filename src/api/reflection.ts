/**
 * gRPC server reflection (`grpc.reflection.v1.ServerReflection` and the older, still widely used
 * `grpc.reflection.v1alpha.ServerReflection`), so grpcurl, Postman and similar tools list and call the
 * services without the .proto files. Both versions answer from the descriptors of the registered services
 * (the same `DescFile`s the API serves; each carries its FileDescriptorProto), over gRPC, gRPC-web and
 * Connect; there is no REST route and no OpenAPI entry.
 *
 * Reflection is public: it needs no token (grpcurl calls it before anything else) and describes the same
 * schema whatever the instance, so the server answers it on any Host (src/server/server.ts).
 *
 * Every file answer holds the file and all its transitive dependencies, the file first (what grpcurl and
 * proto-loader-based clients expect); the protocol allows skipping files sent earlier on the stream, but
 * clients that build each answer on its own need them all.
 */
import { create, type DescFile, type DescService, toBinary } from "@bufbuild/protobuf";
import {
  type DescriptorProto,
  type EnumDescriptorProto,
  type FieldDescriptorProto,
  FileDescriptorProtoSchema,
} from "@bufbuild/protobuf/wkt";
import type { FastifyInstance } from "fastify";
import { Code } from "../errors.ts";
import * as v1 from "../gen/grpc/reflection/v1/reflection_pb.ts";
import * as v1alpha from "../gen/grpc/reflection/v1alpha/reflection_pb.ts";
import { apiService, registerApi } from "./register.ts";

/** The reflection services (both versions), for listing and for the Host exemption of the server. */
export const REFLECTION_SERVICES: readonly DescService[] = [v1.ServerReflection, v1alpha.ServerReflection];

/** What one reflection request is answered with, whatever the protocol version. */
type Answer =
  | { case: "fileDescriptorResponse"; value: { fileDescriptorProto: Uint8Array[] } }
  | { case: "allExtensionNumbersResponse"; value: { baseTypeName: string; extensionNumber: number[] } }
  | { case: "listServicesResponse"; value: { service: { name: string }[] } }
  | { case: "errorResponse"; value: { errorCode: number; errorMessage: string } };

/** The request's question (the oneof `message_request`), the same shape in v1 and v1alpha. */
type Question =
  | v1.ServerReflectionRequest["messageRequest"]
  | v1alpha.ServerReflectionRequest["messageRequest"];

/** Indexes of the served descriptors: files by name, symbols and extensions to their file. */
export class ReflectionIndex {
  private readonly files = new Map<string, DescFile>();
  private readonly symbols = new Map<string, DescFile>();
  /** Extendee full name → extension number → file declaring the extension. */
  private readonly extensions = new Map<string, Map<number, DescFile>>();
  /** Message full names (extendees of all_extension_numbers_of_type). */
  private readonly messages = new Set<string>();
  private readonly serialized = new Map<string, Uint8Array>();
  readonly serviceNames: string[];

  constructor(services: readonly DescService[]) {
    this.serviceNames = [...new Set(services.map((s) => s.typeName))].sort();
    for (const service of services) this.addFile(service.file);
  }

  private addFile(file: DescFile): void {
    if (this.files.has(file.proto.name)) return;
    this.files.set(file.proto.name, file);
    for (const dependency of file.dependencies) this.addFile(dependency);
    // Walk the FileDescriptorProto rather than the Desc objects: it also holds what protobuf-es leaves out
    // of them, such as the entry messages of map fields (`pkg.Message.FieldEntry`).
    const proto = file.proto;
    const symbol = (name: string) => {
      if (!this.symbols.has(name)) this.symbols.set(name, file);
    };
    const within = (scope: string, name: string) => (scope ? `${scope}.${name}` : name);
    const addEnum = (scope: string, e: EnumDescriptorProto) => {
      symbol(within(scope, e.name));
      // enum values are scoped like siblings of their enum (`pkg.VALUE`, `pkg.Message.VALUE`)
      for (const value of e.value) symbol(within(scope, value.name));
    };
    const addExtension = (scope: string, x: FieldDescriptorProto) => {
      symbol(within(scope, x.name));
      const extendee = x.extendee.replace(/^\./, "");
      const byNumber = this.extensions.get(extendee) ?? new Map<number, DescFile>();
      byNumber.set(x.number, file);
      this.extensions.set(extendee, byNumber);
    };
    const addMessage = (scope: string, m: DescriptorProto) => {
      const name = within(scope, m.name);
      symbol(name);
      this.messages.add(name);
      for (const field of m.field) symbol(`${name}.${field.name}`);
      for (const oneof of m.oneofDecl) symbol(`${name}.${oneof.name}`);
      for (const nested of m.nestedType) addMessage(name, nested);
      for (const nested of m.enumType) addEnum(name, nested);
      for (const nested of m.extension) addExtension(name, nested);
    };
    for (const m of proto.messageType) addMessage(proto.package, m);
    for (const e of proto.enumType) addEnum(proto.package, e);
    for (const x of proto.extension) addExtension(proto.package, x);
    for (const service of proto.service) {
      const name = within(proto.package, service.name);
      symbol(name);
      for (const method of service.method) symbol(`${name}.${method.name}`);
    }
  }

  /** The answer to one request. */
  answer(question: Question): Answer {
    switch (question.case) {
      case "listServices":
        return {
          case: "listServicesResponse",
          value: { service: this.serviceNames.map((name) => ({ name })) },
        };
      case "fileByFilename":
        return this.fileAnswer(this.files.get(question.value), `file "${question.value}" not found`);
      case "fileContainingSymbol": {
        // a leading dot (`.pkg.Type`, as in descriptor type names) names the same symbol
        const name = question.value.replace(/^\./, "");
        return this.fileAnswer(this.symbols.get(name), `symbol "${question.value}" not found`);
      }
      case "fileContainingExtension": {
        const { containingType, extensionNumber } = question.value;
        const type = containingType.replace(/^\./, "");
        return this.fileAnswer(
          this.extensions.get(type)?.get(extensionNumber),
          `extension ${extensionNumber} of "${containingType}" not found`,
        );
      }
      case "allExtensionNumbersOfType": {
        const type = question.value.replace(/^\./, "");
        if (!this.messages.has(type)) return notFound(`type "${question.value}" not found`);
        const numbers = [...(this.extensions.get(type)?.keys() ?? [])].sort((a, b) => a - b);
        return {
          case: "allExtensionNumbersResponse",
          value: { baseTypeName: type, extensionNumber: numbers },
        };
      }
      default:
        return {
          case: "errorResponse",
          value: { errorCode: Code.INVALID_ARGUMENT, errorMessage: "message_request is required" },
        };
    }
  }

  /** The file and its transitive dependencies (the file first), serialized; NOT_FOUND without a file. */
  private fileAnswer(file: DescFile | undefined, notFoundMessage: string): Answer {
    if (!file) return notFound(notFoundMessage);
    const closure: DescFile[] = [];
    const seen = new Set<string>();
    const visit = (f: DescFile) => {
      if (seen.has(f.proto.name)) return;
      seen.add(f.proto.name);
      closure.push(f);
      f.dependencies.forEach(visit);
    };
    visit(file);
    return {
      case: "fileDescriptorResponse",
      value: { fileDescriptorProto: closure.map((f) => this.bytes(f)) },
    };
  }

  private bytes(file: DescFile): Uint8Array {
    let bytes = this.serialized.get(file.proto.name);
    if (!bytes) {
      // the descriptor as compiled (options and their extensions are kept as unknown fields)
      bytes = toBinary(FileDescriptorProtoSchema, file.proto);
      this.serialized.set(file.proto.name, bytes);
    }
    return bytes;
  }
}

const notFound = (message: string): Answer => ({
  case: "errorResponse",
  value: { errorCode: Code.NOT_FOUND, errorMessage: message },
});

/**
 * Registers both reflection services on the app for `services` (plus the reflection services
 * themselves), without authentication and without REST routes.
 */
export function registerReflection(app: FastifyInstance, services: readonly DescService[]): void {
  const index = new ReflectionIndex([...services, ...REFLECTION_SERVICES]);
  registerApi(
    app,
    [
      apiService(v1.ServerReflection, {
        async *serverReflectionInfo(requests) {
          for await (const request of requests) {
            yield create(v1.ServerReflectionResponseSchema, {
              validHost: request.host,
              originalRequest: request,
              messageResponse: index.answer(request.messageRequest),
            });
          }
        },
      }),
      apiService(v1alpha.ServerReflection, {
        async *serverReflectionInfo(requests) {
          for await (const request of requests) {
            yield create(v1alpha.ServerReflectionResponseSchema, {
              validHost: request.host,
              originalRequest: request,
              messageResponse: index.answer(request.messageRequest),
            });
          }
        },
      }),
    ],
    { rest: false },
  );
}
