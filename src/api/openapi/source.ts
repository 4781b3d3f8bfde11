/**
 * Inputs of `npm run generate`'s OpenAPI step (scripts/gen-openapi.ts) and of the test that checks the
 * committed output: the documented services (every service of the generated code under
 * src/gen/platform that has `google.api.http` rules, except the test-only `platform.testing.*`) and their
 * proto comments, read from a `buf build` image of proto/ (the generated code carries no comments).
 *
 * Not used by the server: it builds the document from the services it serves and ./comments.json.
 */
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { type DescFile, type DescService, fromBinary, getOption } from "@bufbuild/protobuf";
import { usedTypes } from "@bufbuild/protobuf/reflect";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { http } from "../../gen/google/api/annotations_pb.ts";
import { buildOpenApi, DEFAULT_INFO, type JsonObject } from "./build.ts";
import { extractComments } from "./comments.ts";

/** The repository root. */
export const repoRoot = path.resolve(import.meta.dirname, "..", "..", "..");

/** Where the committed outputs live, relative to the repository root. */
export const OPENAPI_PATH = "docs/openapi.json";
export const COMMENTS_PATH = "src/api/openapi/comments.json";

function isDescFile(v: unknown): v is DescFile {
  return typeof v === "object" && v !== null && (v as { kind?: unknown }).kind === "file";
}

/** Whether a service has at least one `google.api.http` rule. */
export function hasHttpRules(service: DescService): boolean {
  return service.methods.some((m) => getOption(m, http).pattern.case !== undefined);
}

/**
 * Imports every `*_pb.ts` below src/gen/platform and returns the services that have HTTP rules, except
 * `platform.testing.*`, sorted by full name.
 */
export async function discoverServices(root = repoRoot): Promise<DescService[]> {
  const dir = path.join(root, "src", "gen", "platform");
  const files = (readdirSync(dir, { recursive: true, encoding: "utf8" }) as string[])
    .filter((f) => f.endsWith("_pb.ts"))
    .map((f) => path.join(dir, f))
    .sort();
  const services = new Map<string, DescService>();
  for (const f of files) {
    const mod = (await import(pathToFileURL(f).href)) as Record<string, unknown>;
    for (const value of Object.values(mod)) {
      if (!isDescFile(value)) continue;
      for (const s of value.services) {
        if (s.typeName.startsWith("platform.testing.") || !hasHttpRules(s)) continue;
        services.set(s.typeName, s);
      }
    }
  }
  return [...services.values()].sort((a, b) => (a.typeName < b.typeName ? -1 : 1));
}

/**
 * Proto file names (`a/b.proto`) of the services and of every message and enum their requests and
 * responses use (without google/protobuf/*).
 */
export function fileClosure(services: DescService[]): Set<string> {
  const names = new Set<string>();
  for (const s of services) {
    names.add(s.file.proto.name);
    for (const m of s.methods) {
      for (const root of [m.input, m.output]) {
        names.add(root.file.proto.name);
        for (const t of usedTypes(root)) names.add(t.file.proto.name);
      }
    }
  }
  // the well-known types are described by the proto3 JSON mapping, not by their comments
  return new Set([...names].filter((n) => !n.startsWith("google/protobuf/")));
}

/** Runs `buf build` (with source info) over proto/ and returns the comments of the services' files. */
export function readProtoComments(services: DescService[], root = repoRoot): Record<string, string> {
  const bin = path.join(root, "node_modules", ".bin", process.platform === "win32" ? "buf.cmd" : "buf");
  const res = spawnSync(bin, ["build", "--as-file-descriptor-set", "-o", "-"], {
    cwd: root,
    maxBuffer: 256 * 1024 * 1024,
    stdio: ["ignore", "pipe", "pipe"],
  });
  if (res.error || res.status !== 0) {
    throw new Error(`buf build failed: ${res.error?.message ?? res.stderr.toString("utf8").trim()}`);
  }
  const set = fromBinary(FileDescriptorSetSchema, new Uint8Array(res.stdout));
  return extractComments(set, fileClosure(services));
}

/** JSON as committed: two-space indentation and a final newline. */
export function formatJson(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

export interface GeneratedOpenApi {
  /** The documented services. */
  services: DescService[];
  /** Contents of docs/openapi.json. */
  openapi: string;
  /** Contents of src/api/openapi/comments.json. */
  comments: string;
}

/** Everything `npm run generate` writes for the OpenAPI document, built fresh from src/gen and proto/. */
export async function generateOpenApi(root = repoRoot): Promise<GeneratedOpenApi> {
  const services = await discoverServices(root);
  const comments = readProtoComments(services, root);
  const doc: JsonObject = buildOpenApi(services, { ...DEFAULT_INFO, comments });
  return { services, openapi: formatJson(doc), comments: formatJson(comments) };
}
