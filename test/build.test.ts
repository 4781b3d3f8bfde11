// The production build (docs/operations.md "Build and production install"): a copy of this checkout as a
// fresh clone has it builds dist/ on its first `platform start` and then serves from compiled JavaScript
// alone (tsx is not even installed in the copy), initdb of the embedded database included; a restart
// builds nothing; without the compiler (a production install) dist/ runs as it is, and a missing dist/ is
// refused with one line. test/rebuild.test.ts covers rebuilds and the command line; the full `npm ci` /
// `npm run build` / `npm prune --omit=dev` cycle runs in .ci/run (scripts/check-install.mjs).
import assert from "node:assert/strict";
import { appendFileSync, existsSync, rmSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import { freshBackend, type TestBackend, tempDir } from "./helpers.ts";
import { HttpBrowser } from "./login.ts";
import { copyOfCheckout, runPlatformIn, startProcess } from "./process.ts";

const ADMIN_PASSWORD = "Build-Test-Passw0rd!";
const start = (checkout: string) => [process.execPath, path.join(checkout, "bin", "platform.js"), "start"];
/** What a production install lacks: the devDependencies that matter here. */
const devTools = ["typescript", "@typescript", "tsx", "esbuild", "@esbuild", "preact"];

describe("production build", () => {
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
  // without tsx: nothing runs the sources; esbuild stays, the console's bundler (scripts/build-console.mjs)
  const clone = copyOf({ without: ["tsx"] });
  /** A fresh database; `initdb`: on the embedded one an empty directory, so that initdb runs (compiled) too. */
  const backend = async ({ initdb = false } = {}): Promise<Record<string, string>> => {
    if (initdb && !process.env.DATABASE_URL)
      return { PLATFORM_DATA_DIR: path.join(tempDir("data-"), "data") };
    const b = await freshBackend();
    backends.push(b);
    return b.env;
  };

  it("a fresh clone builds on its first start and serves from compiled JavaScript", async () => {
    assert.equal(existsSync(path.join(clone, "dist")), false);
    const env = {
      ...(await backend({ initdb: true })),
      PLATFORM_PORT: "0",
      PLATFORM_FIRSTINSTANCE_ADMIN_PASSWORD: ADMIN_PASSWORD,
    };
    const first = await startProcess(env, 100_000, start(clone));
    try {
      assert.match(
        first.stderr(),
        /^platform: no build yet: compiling src\/ to dist\/\nplatform: built dist\/ in /,
      );
      assert.match(first.stdout(), /first start: created instance \d+/);
      for (const file of [
        "cli.js",
        "cli.js.map",
        "storage/migrations/0001_eventstore.sql",
        "login/locales/de.json",
        "console-ui/index.html",
      ])
        assert.ok(existsSync(path.join(clone, "dist", file)), `dist/${file}`);
      assert.equal((await fetch(`${first.url}/ready`)).status, 200);
      assert.equal((await fetch(`${first.url}/ui/console/`)).status, 200, "the console's bundle is built");

      // the files the code reads beside itself: API reference assets, proto comments, templates, catalogues
      const docs = await (await fetch(`${first.url}/docs`)).text();
      const script = /src="(\/docs\/assets\/docs\.js\?v=\w+)"/.exec(docs)?.[1];
      assert.ok(script, docs.slice(0, 500));
      assert.equal((await fetch(`${first.url}${script}`)).status, 200);
      const openapi = (await (await fetch(`${first.url}/openapi.json`)).json()) as { paths: object };
      assert.ok(Object.keys(openapi.paths).length > 50);

      const browser = new HttpBrowser(first.url, { "accept-language": "de" });
      const loginPage = await browser.follow("/");
      assert.equal(loginPage.status, 200);
      assert.match(loginPage.text, /Anmeldename/);
      const stylesheet = /href="(\/ui\/assets\/login\.\w+\.css)"/.exec(loginPage.text)?.[1];
      assert.equal((await browser.get(stylesheet!)).status, 200);
      const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName: "admin" });
      const account = await browser.submit(passwordPage, "/ui/login/password", { password: ADMIN_PASSWORD });
      assert.equal(account.status, 200);
      assert.match(account.text, /<h1 id="page-title">/);
    } finally {
      assert.equal(await first.stop(), 0);
    }

    const restart = await startProcess(env, 60_000, start(clone));
    try {
      assert.equal(restart.stderr(), "", "nothing to build");
      assert.equal((await fetch(`${restart.url}/ready`)).status, 200);
    } finally {
      assert.equal(await restart.stop(), 0);
    }
  });

  it("a production install (no devDependencies) runs dist/ as built, and refuses without it", async () => {
    const env = { ...(await backend()), PLATFORM_PORT: "0" };
    const missing = await runPlatformIn(copyOf({ without: devTools }), ["start"], env);
    assert.deepEqual(missing, {
      code: 1,
      stdout: "",
      stderr:
        "platform: dist/ is missing and the TypeScript compiler is not installed: build first " +
        "(`npm ci && npm run build`, then `npm prune --omit=dev`)\n",
    });

    const built = copyOf({ without: devTools, dist: path.join(clone, "dist") });
    appendFileSync(path.join(built, "src", "cli.ts"), "\n// changed after the build\n");
    const started = await startProcess(env, 60_000, start(built));
    try {
      assert.equal(started.stderr(), "", "no compiler: no check, no build");
      assert.equal((await fetch(`${started.url}/ready`)).status, 200);
      assert.equal(
        (await fetch(`${started.url}/ui/console/`)).status,
        200,
        "the console as built, no bundler",
      );
    } finally {
      assert.equal(await started.stop(), 0);
    }
  });
});
