#!/usr/bin/env node
// Verifies that the committed generated code in src/gen matches the protos: runs `buf generate` (with the
// same buf.gen.yaml) into a temporary directory and compares file by file. Exit 1 listing the differing,
// missing and extra files when they differ; run `npm run generate` to update src/gen.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const genDir = "src/gen";

/** Relative paths of all files below dir (empty when dir does not exist). */
function listFiles(dir) {
  if (!existsSync(dir)) return [];
  const out = [];
  const walk = (d) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, entry.name);
      if (entry.isDirectory()) walk(p);
      else out.push(relative(dir, p));
    }
  };
  walk(dir);
  return out.sort();
}

const tmp = mkdtempSync(join(tmpdir(), "platform-gen-"));
try {
  const bin = join(root, "node_modules", ".bin");
  const res = spawnSync(
    join(bin, process.platform === "win32" ? "buf.cmd" : "buf"),
    ["generate", "--output", tmp],
    {
      cwd: root,
      env: { ...process.env, PATH: `${bin}${delimiter}${process.env.PATH ?? ""}` },
      stdio: ["ignore", "inherit", "inherit"],
    },
  );
  if (res.error || res.status !== 0) {
    console.error(`check-generated: buf generate failed${res.error ? `: ${res.error.message}` : ""}`);
    process.exit(1);
  }
  const fresh = join(tmp, genDir);
  const committed = join(root, genDir);
  const freshFiles = listFiles(fresh);
  const committedFiles = new Set(listFiles(committed));
  const problems = [];
  for (const f of freshFiles) {
    if (!committedFiles.has(f)) problems.push(`missing:   ${genDir}/${f}`);
    else if (!readFileSync(join(fresh, f)).equals(readFileSync(join(committed, f)))) {
      problems.push(`outdated:  ${genDir}/${f}`);
    }
    committedFiles.delete(f);
  }
  for (const f of committedFiles) problems.push(`extra:     ${genDir}/${f}`);
  if (problems.length > 0) {
    console.error(`check-generated: ${genDir} is not up to date with proto/ (run \`npm run generate\`):`);
    for (const p of problems) console.error(`  ${p}`);
    process.exit(1);
  }
  console.log(`check-generated: ${genDir} is up to date (${freshFiles.length} files)`);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
