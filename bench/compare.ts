// `npm run bench:compare`: two versions of Platform side by side under this checkout's scenarios and load
// generator. Runs `bench/run.ts` BENCH_COMPARE_ROUNDS times (default 3) for each version, alternating
// (before, after, after, before, …: each sees the same neighbours' load on a shared machine), each run on a
// fresh database with its own fresh peer, and prints the median of each figure per version.
// BENCH_BEFORE_DIR: the older checkout (with node_modules; it builds itself on its first start). Every other
// BENCH_* variable passes through (BENCH_ONLY, BENCH_DURATION, DATABASE_URL, …); BENCH_ROUNDS is 1 per run.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Row } from "./report.ts";

const before = process.env.BENCH_BEFORE_DIR;
if (!before) {
  console.error("BENCH_BEFORE_DIR must name the older checkout");
  process.exit(2);
}
const rounds = Math.max(1, Number(process.env.BENCH_COMPARE_ROUNDS ?? 3));
const root = path.resolve(import.meta.dirname, "..");
const dir = mkdtempSync(path.join(os.tmpdir(), "platform-compare-"));
const runs: Record<"before" | "after", Row[][]> = { before: [], after: [] };

for (let round = 0; round < rounds; round++) {
  const order: Array<"before" | "after"> = round % 2 ? ["after", "before"] : ["before", "after"];
  for (const version of order) {
    const file = path.join(dir, `${version}-${round}.jsonl`);
    console.log(`round ${round + 1}/${rounds}: ${version}`);
    const run = spawnSync(process.execPath, ["--import", "tsx", path.join(root, "bench/run.ts")], {
      cwd: root,
      env: {
        ...process.env,
        BENCH_ROUNDS: "1",
        BENCH_JSON: file,
        BENCH_SERVER_DIR: version === "before" ? path.resolve(before) : root,
      },
      stdio: ["ignore", "inherit", "inherit"],
    });
    if (run.status !== 0) throw new Error(`bench/run.ts (${version}) exited with ${run.status}`);
    runs[version].push(
      readFileSync(file, "utf8")
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as Row),
    );
  }
}
rmSync(dir, { recursive: true, force: true });

const median = (values: Array<number | null | undefined>) => {
  const sorted = values.filter((v): v is number => typeof v === "number").sort((a, b) => a - b);
  return sorted.length ? sorted[Math.floor(sorted.length / 2)] : undefined;
};
const fmt = (n: number | undefined, digits = 0) => (n === undefined ? "–" : n.toFixed(digits));
const scenarios = [...new Set(runs.after.flat().map((r) => `${r.group}\u0000${r.scenario}`))];
console.log(
  `\nBefore (${path.resolve(before)}) and after (${root}), median of ${rounds} alternating runs each; ` +
    "ratio = ours / the reference of the same run (peer, argon2id, small database)\n",
);
console.log(
  "| group | scenario | before req/s | p50 | p99 | ratio | after req/s | p50 | p99 | ratio | after / before |",
);
console.log("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
for (const key of scenarios) {
  const [group, scenario] = key.split("\u0000");
  const pick = (version: "before" | "after") => {
    const rows = runs[version].map((run) => run.find((r) => r.group === group && r.scenario === scenario));
    return {
      rps: median(rows.map((r) => r?.rps)),
      p50: median(rows.map((r) => r?.p50)),
      p99: median(rows.map((r) => r?.p99)),
      ratio: median(rows.map((r) => (r?.reference?.rps ? r.rps / r.reference.rps : undefined))),
    };
  };
  const b = pick("before");
  const a = pick("after");
  const digits = (n: number | undefined) => (n !== undefined && n < 100 ? 1 : 0);
  console.log(
    `| ${group} | ${scenario} | ${fmt(b.rps, digits(b.rps))} | ${fmt(b.p50, 1)} | ${fmt(b.p99, 1)} | ${fmt(b.ratio, 2)} | ` +
      `${fmt(a.rps, digits(a.rps))} | ${fmt(a.p50, 1)} | ${fmt(a.p99, 1)} | ${fmt(a.ratio, 2)} | ` +
      `${a.rps && b.rps ? (a.rps / b.rps).toFixed(2) : "–"} |`,
  );
}
