/**
 * The curl recipes of README.md and docs/*.md, run as written against a real server, so that they stay true.
 *
 * A recipe is a fenced code block marked `sh`, `bash` or `console` that calls `curl` (grpcurl does not count).
 * The recipes of one page run in the order of the page, in one `bash -euo pipefail` shell (a block sees
 * the variables the blocks above it set), against a server of the page's own on a fresh database, started
 * with `PLATFORM_FIRSTINSTANCE_PAT_PATH`. The shell has the variables every page states at its top:
 * `BASE` (the server's URL) and `TOKEN` (the first instance's IAM_OWNER token, also in `./admin.pat` of
 * the shell's working directory, a fresh directory per page). `curl` in the shell is curl with
 * `--fail-with-body --show-error` (or the recipe's own `-f`): a call answered with an HTTP error fails its
 * block, and the page's test fails naming the page, the block's line and its output. `sleep` returns at
 * once: a recipe's waits are for clients elsewhere (caches of a key set), not for this server.
 *
 * A comment right before a block (blank lines between are allowed) changes how it runs:
 * - `<!-- recipe: skip (reason) -->`: not run (an external identity provider, an SMTP server, a browser,
 *   an authenticator app ...); the reason is required and every skipped block is reported.
 * - `<!-- recipe: fails (reason) -->`: a recipe showing a refusal; it runs in a subshell (its variables
 *   stay there) and must fail on a curl answered with an HTTP error (curl's exit code 22).
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { startPlatform, tempDir } from "./helpers.ts";
import { freePort } from "./process.ts";

const root = path.resolve(import.meta.dirname, "..");
const pages = [
  "README.md",
  ...readdirSync(path.join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`),
];

interface Recipe {
  line: number;
  code: string;
  mode: "run" | "skip" | "fails";
  reason?: string;
}

/** The curl recipes of a page, with their markers. */
function recipesOf(markdown: string): Recipe[] {
  const lines = markdown.split("\n");
  const recipes: Recipe[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\w*)\s*$/.exec(lines[i]);
    if (!open) continue;
    const indent = open[1].length;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) body.push(lines[i].slice(indent));
    const code = body.join("\n");
    if (!["sh", "bash", "console"].includes(open[2]) || !/(^|[^\w-])curl\b/m.test(code)) continue;
    let before = start - 1;
    while (before >= 0 && lines[before].trim() === "") before--;
    const marker = /^\s*<!--\s*recipe:\s*(skip|fails)\s*(?:\((.+)\))?\s*-->\s*$/.exec(lines[before] ?? "");
    if (marker && !marker[2])
      throw new Error(`line ${before + 1}: a "recipe: ${marker[1]}" marker needs a (reason)`);
    recipes.push({
      line: start + 1,
      code,
      mode: marker ? (marker[1] as "skip" | "fails") : "run",
      reason: marker?.[2],
    });
  }
  return recipes;
}

/** The page's shell script: each block announces itself on stderr (`@@recipe <line>`) before it runs. */
function scriptOf(recipes: Recipe[]): string {
  // curl fails on an HTTP error: with the recipe's -f, else with --fail-with-body (curl refuses both)
  const parts = [
    `curl() {
  local a
  for a in "$@"; do
    case "$a" in --fail | --fail-with-body | -f* | -[!-]*f*) command curl --show-error "$@"; return;; esac
  done
  command curl --fail-with-body --show-error "$@"
}`,
    "sleep() { :; }",
  ];
  for (const r of recipes) {
    if (r.mode === "skip") continue;
    parts.push(`echo "@@recipe ${r.line}" >&2`);
    if (r.mode === "run") parts.push(r.code);
    else
      parts.push(
        `set +e\n(\nset -e\n${r.code}\n)\nrc=$?\nset -e\n` +
          `if [ "$rc" -ne 22 ]; then echo "@@expected an HTTP error (curl exit 22), got exit $rc" >&2; exit 1; fi`,
      );
  }
  parts.push('echo "@@recipe done" >&2');
  return `${parts.join("\n")}\n`;
}

function run(script: string, cwd: string, env: Record<string, string>) {
  return new Promise<{ code: number | null; output: string; stderr: string }>((resolve) => {
    const child = spawn("bash", ["-euo", "pipefail", "-c", script], {
      cwd,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: cwd, LANG: "C.UTF-8", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    let stderr = "";
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => {
      output += d;
      stderr += d;
    });
    child.on("exit", (code) => resolve({ code, output, stderr }));
  });
}

test("curl and jq are installed (apt-get install curl jq)", () => {
  for (const tool of ["curl", "jq"])
    assert.equal(spawnSync("sh", ["-c", `command -v ${tool}`]).status, 0, `${tool} is not installed`);
});

let ran = 0;
let skipped = 0;
for (const page of pages) {
  const recipes = recipesOf(readFileSync(path.join(root, page), "utf8"));
  if (recipes.length === 0) continue;
  test(`${page}: its curl recipes run as written`, async (t) => {
    for (const r of recipes.filter((r) => r.mode === "skip")) {
      skipped++;
      t.diagnostic(`skipped ${page}:${r.line}: ${r.reason}`);
    }
    ran += recipes.filter((r) => r.mode !== "skip").length;
    if (recipes.every((r) => r.mode === "skip")) return;
    const dir = tempDir("recipes-");
    const port = await freePort();
    // a known port, so that the issuer and every URL the server builds name the port it listens on
    const platform = await startPlatform({
      listen: true,
      env: { PLATFORM_PORT: String(port), PLATFORM_FIRSTINSTANCE_PAT_PATH: path.join(dir, "admin.pat") },
    });
    try {
      const base = platform.url;
      const token = readFileSync(path.join(dir, "admin.pat"), "utf8").trim();
      const { code, output, stderr } = await run(scriptOf(recipes), dir, { BASE: base, TOKEN: token });
      const last = [...stderr.matchAll(/^@@recipe (\S+)$/gm)].at(-1)?.[1];
      assert.ok(
        code === 0 && last === "done",
        `${page}: the recipe at line ${last} failed (exit ${code}):\n${output.slice(-4000)}`,
      );
    } finally {
      await platform.stop();
    }
  });
}

test("skipped recipes are reported", (t) => {
  t.diagnostic(`${ran} recipe(s) run, ${skipped} skipped by a "recipe: skip" marker`);
});
