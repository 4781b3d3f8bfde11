import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { restClient, startPlatform, type TestPlatform, tempDir } from "../../test/helpers.ts";
import { machineClient, ownerToken } from "../../test/oidc.ts";
import { testTime } from "../../test/time.ts";

const run = promisify(execFile);

/** Debian's golang.org/x/oauth2 (golang-golang-x-oauth2-dev), used in GOPATH mode: nothing is downloaded. */
const GOPATH = "/usr/share/gocode";

/** Why the Go recipe cannot run here, or undefined when it can. */
function missingGo(): string | undefined {
  const go = spawnSync("go", ["version"], { encoding: "utf8" });
  if (go.error || go.status !== 0) {
    return "no Go toolchain (`go`): install the Debian packages golang-go and golang-golang-x-oauth2-dev";
  }
  if (!existsSync(path.join(GOPATH, "src/golang.org/x/oauth2/jwt/jwt.go"))) {
    return `no golang.org/x/oauth2 under ${GOPATH}: install the Debian package golang-golang-x-oauth2-dev`;
  }
  return undefined;
}

/** The Go program of docs/oidc.md ("The jwt-bearer grant", From Go): the page's only `go` block. */
function recipe(): string {
  const page = readFileSync(new URL("../../docs/oidc.md", import.meta.url), "utf8");
  const blocks = [...page.matchAll(/^```go\n([\s\S]*?)^```$/gm)];
  assert.equal(blocks.length, 1, "docs/oidc.md has one Go program");
  return blocks[0]![1]!;
}

const skip = missingGo();

/**
 * The Go recipe of docs/oidc.md, built as written against golang.org/x/oauth2/jwt and run against a server:
 * the library's default `aud` (the token URL) is accepted and it reads the ID token of the default scope
 * `openid`; with the strict profile the recipe needs its `Audience` line.
 */
describe("jwt-bearer from Go (golang.org/x/oauth2/jwt, the recipe of docs/oidc.md)", { skip }, () => {
  const dir = tempDir("platform-go-");
  const platforms: TestPlatform[] = [];
  const serve = async (env: Record<string, string> = {}) => {
    const p = await startPlatform({ listen: true, env });
    platforms.push(p);
    return p;
  };

  /** Builds `source` offline into an executable. */
  const build = async (name: string, source: string) => {
    const file = path.join(dir, `${name}.go`);
    writeFileSync(file, source);
    const binary = path.join(dir, name);
    await run("go", ["build", "-o", binary, file], {
      cwd: dir,
      timeout: testTime(300_000),
      env: {
        PATH: process.env.PATH,
        HOME: dir,
        GO111MODULE: "off",
        GOPATH,
        GOCACHE: path.join(dir, "cache"),
        GOFLAGS: "",
        GOPROXY: "off",
      },
    });
    return binary;
  };
  /** A machine user with a server-generated key, its key file written as the docs say (key_content). */
  const keyFile = async (p: TestPlatform, username: string) => {
    const owner = await ownerToken(p, `owner-${username}`);
    const svc = await machineClient(p, owner, username);
    const key = await restClient(p, () => owner)("POST", `/resources/v3alpha/users/${svc.userId}/keys`, {
      json: {},
    });
    assert.equal(key.status, 201, key.text);
    const file = path.join(dir, `${username}.json`);
    writeFileSync(file, Buffer.from(key.json.key_content, "base64"));
    return { userId: svc.userId, file };
  };
  /** Runs a built recipe against `p`: its exit code and output. */
  const userinfo = async (binary: string, p: TestPlatform, file: string) => {
    try {
      const { stdout } = await run(binary, [], {
        timeout: testTime(60_000),
        env: { ISSUER: p.url, KEY_FILE: file },
      });
      return { ok: true, output: stdout };
    } catch (error) {
      const failed = error as { stdout?: string; stderr?: string };
      return { ok: false, output: `${failed.stdout ?? ""}${failed.stderr ?? ""}` };
    }
  };

  let asWritten: string;
  let withAudience: string;
  before(async () => {
    const source = recipe();
    const uncommented = source.replace("// Audience: issuer,", "Audience: issuer,");
    assert.notEqual(uncommented, source, "the recipe names the Audience line");
    asWritten = await build("userinfo", source);
    withAudience = await build("userinfo-strict", uncommented);
  });
  after(async () => {
    for (const p of platforms) await p.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("as written: the token URL as aud, the default scope openid, the single-audience ID token read → userinfo", async () => {
    const platform = await serve();
    const { userId, file } = await keyFile(platform, "svc-go");
    const answer = await userinfo(asWritten, platform, file);
    assert.ok(answer.ok, answer.output);
    assert.match(answer.output, /^200 OK /);
    assert.deepEqual(JSON.parse(answer.output.slice("200 OK ".length)), { sub: userId });
  });

  it("the strict profile: the recipe as written is refused (invalid_grant); with its Audience line it works", async () => {
    const platform = await serve({ PLATFORM_ASSERTION_AUDIENCE: "strict" });
    const { userId, file } = await keyFile(platform, "svc-go-strict");
    const refused = await userinfo(asWritten, platform, file);
    assert.equal(refused.ok, false, refused.output);
    assert.match(refused.output, /invalid_grant/);
    assert.match(refused.output, /strict profile/);
    const answer = await userinfo(withAudience, platform, file);
    assert.ok(answer.ok, answer.output);
    assert.deepEqual(JSON.parse(answer.output.slice("200 OK ".length)), { sub: userId });
  });
});
