// The production build (docs/operations.md "Build and production install"), starting from this checkout's
// dist/ (scripts/test.mjs builds it) in copies of the checkout without tsx: every `platform` command runs
// compiled; dist/ is rebuilt when a source changed (emitting only; `npm run build` type-checks), and a
// source that does not parse stops the command and keeps the last good dist/. test/build.test.ts covers
// a fresh clone's first start and a production install.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { appendFileSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import { freshBackend, type TestBackend } from "./helpers.ts";
import { copyOfCheckout, runPlatformIn, startProcess } from "./process.ts";

const root = path.resolve(import.meta.dirname, "..");
const dist = path.join(root, "dist");
const start = (checkout: string) => [process.execPath, path.join(checkout, "bin", "platform.js"), "start"];

describe("platform from dist/", () => {
  const backends: TestBackend[] = [];
  const copies: string[] = [];
  after(async () => {
    for (const backend of backends) await backend.cleanup();
    for (const copy of copies) rmSync(copy, { recursive: true, force: true });
  });
  const copyOf = (options: Parameters<typeof copyOfCheckout>[0]) => {
    const copy = copyOfCheckout(options);
    copies.push(copy);
    return copy;
  };
  const backend = async () => {
    const b = await freshBackend();
    backends.push(b);
    return b.env;
  };

  it("the commands run compiled: --version, start, migrate, projections rebuild, keys rotate", async () => {
    const checkout = copyOf({ without: ["tsx"], dist });
    const env = await backend();
    const version = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")).version;
    assert.deepEqual(await runPlatformIn(checkout, ["--version"], {}), {
      code: 0,
      stdout: `platform ${version}\n`,
      stderr: "",
    });
    const started = await startProcess({ ...env, PLATFORM_PORT: "0" }, 60_000, start(checkout));
    assert.equal(started.stderr(), "", "dist/ is current: nothing to build");
    assert.equal((await fetch(`${started.url}/ready`)).status, 200);
    assert.equal(await started.stop(), 0);
    const migrate = await runPlatformIn(checkout, ["migrate"], env);
    assert.deepEqual([migrate.code, migrate.stdout], [0, "database is up to date\n"], migrate.stderr);
    const rebuild = await runPlatformIn(checkout, ["projections", "rebuild", "users"], env);
    assert.match(rebuild.stdout, /^users: replayed [1-9]\d* events\n$/, rebuild.stderr);
    const rotate = await runPlatformIn(checkout, ["keys", "rotate"], env);
    assert.match(rotate.stdout, /^instance \d+: signing with key \S+\n$/, rotate.stderr);
  });

  it("rebuilds when a source changed, and keeps the last build when the sources do not compile", async () => {
    const checkout = copyOf({ without: ["tsx"], dist });
    const source = path.join(checkout, "src", "cli.ts");
    const original = readFileSync(source, "utf8");
    const built = () => readFileSync(path.join(checkout, "dist", "cli.js"), "utf8");
    appendFileSync(source, "\n// changed\n");
    // any command but a version query (which answers from package.json alone) checks the build first
    const changed = await runPlatformIn(checkout, ["help", "migrate"], {});
    assert.equal(changed.code, 0, changed.stderr);
    assert.match(
      changed.stderr,
      /^platform: the sources changed since the last build: compiling src\/ to dist\/\n/,
    );
    assert.match(built(), /\/\/ changed/);

    // a start emits without type-checking (as tsx ran the sources before); `npm run build` checks
    writeFileSync(source, `${original}\nexport const typeError: number = "not a number";\n`);
    const typeError = await runPlatformIn(checkout, ["help", "migrate"], {});
    assert.equal(typeError.code, 0, typeError.stderr);
    assert.match(built(), /export const typeError = "not a number";/);
    const build = spawnSync(process.execPath, ["scripts/build.mjs"], { cwd: checkout, encoding: "utf8" });
    assert.equal(build.status, 1);
    assert.match(build.stdout, /src\/cli\.ts\(\d+,\d+\): error TS2322/);
    assert.match(
      build.stdout,
      /build: the TypeScript compiler reported errors \(above\); dist\/ is unchanged\n$/,
    );

    writeFileSync(source, `${original}\nexport const syntaxError = ;\n`);
    const syntaxError = await runPlatformIn(checkout, ["help", "migrate"], {});
    assert.equal(syntaxError.code, 1);
    assert.equal(syntaxError.stdout, "");
    assert.match(syntaxError.stderr, /src\/cli\.ts\(\d+,\d+\): error TS1109/);
    assert.match(
      syntaxError.stderr,
      /platform: the TypeScript compiler reported errors \(above\); dist\/ is unchanged\n$/,
    );
    assert.match(built(), /export const typeError/, "the last build stays");
  });
});
