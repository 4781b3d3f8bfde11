// The benchmark's one table: every scenario's req/s, p50 and p99 beside its reference (the peer provider,
// the raw argon2id rate, or the small database of the growth scenario) and the ratio columns. Scenarios
// record their row as they finish; the table is printed at the end and, with BENCH_JSON=<file>, appended to
// that file as JSON lines (bench/compare.ts reads them to put two versions side by side).
import { appendFileSync } from "node:fs";

export interface Figures {
  rps: number;
  p50: number | null;
  p99: number | null;
}

export interface Row extends Figures {
  /** The group the scenario belongs to: api, oidc, signin, growth, caches. */
  group: string;
  scenario: string;
  errors: number;
  /** What the ratios compare with ("peer", "argon2id", "small database"), and its figures. */
  reference?: { name: string } & Figures;
  /** A line printed under the table (per-round ratios, the first error). */
  note?: string;
}

const rows: Row[] = [];

export function record(row: Row): void {
  rows.push(row);
  if (process.env.BENCH_JSON) appendFileSync(process.env.BENCH_JSON, `${JSON.stringify(row)}\n`);
  // the row as soon as it is measured, so a long run shows progress
  console.log(
    `  ${row.group}: ${row.scenario}: ${format(row.rps)} req/s, p50 ${row.p50} ms, p99 ${row.p99} ms`,
  );
}

const format = (n: number) => (n >= 100 ? String(Math.round(n)) : n.toFixed(1));
const ratio = (a: number | null | undefined, b: number | null | undefined) =>
  a && b ? (a / b).toFixed(2) : "–";

/** Every recorded row in one markdown table. Ratios: req/s ours / reference; latencies reference / ours. */
export function printTable(): void {
  if (!rows.length) return;
  console.log(
    "\n| group | scenario | req/s | p50 ms | p99 ms | reference | ref req/s | ref p50 | ref p99 | req/s ratio | p50 ratio | p99 ratio | errors |",
  );
  console.log("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    const ref = r.reference;
    console.log(
      `| ${r.group} | ${r.scenario} | ${format(r.rps)} | ${r.p50 ?? "–"} | ${r.p99 ?? "–"} | ${ref?.name ?? "–"} | ` +
        `${ref ? format(ref.rps) : "–"} | ${ref?.p50 ?? "–"} | ${ref?.p99 ?? "–"} | ${ratio(r.rps, ref?.rps)} | ` +
        `${ratio(ref?.p50, r.p50)} | ${ratio(ref?.p99, r.p99)} | ${r.errors} |`,
    );
  }
  const notes = rows.filter((r) => r.note);
  if (notes.length) console.log(`\n${notes.map((r) => `- ${r.scenario}: ${r.note}`).join("\n")}`);
  console.log();
}
