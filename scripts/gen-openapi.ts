/**
 * `npm run generate` step after `buf generate`: writes the OpenAPI 3.1 document of every Platform service
 * with `google.api.http` rules to docs/openapi.json, and the proto comments it uses to
 * src/api/openapi/comments.json (the server builds the same document at start-up from its services and that
 * file). Output is deterministic; test src/api/openapi/build.test.ts fails when the committed files are stale.
 *
 *   node --import tsx scripts/gen-openapi.ts           write both files
 *   node --import tsx scripts/gen-openapi.ts --check   exit 1 when a committed file differs
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { COMMENTS_PATH, generateOpenApi, OPENAPI_PATH, repoRoot } from "../src/api/openapi/source.ts";

const check = process.argv.includes("--check");
const generated = await generateOpenApi();
const outputs: [string, string][] = [
  [COMMENTS_PATH, generated.comments],
  [OPENAPI_PATH, generated.openapi],
];
let stale = 0;
for (const [rel, content] of outputs) {
  const file = path.join(repoRoot, rel);
  const current = existsSync(file) ? readFileSync(file, "utf8") : undefined;
  if (current === content) {
    console.log(`gen-openapi: ${rel} is up to date`);
    continue;
  }
  if (check) {
    console.error(`gen-openapi: ${rel} is not up to date (run \`npm run generate\`)`);
    stale++;
    continue;
  }
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, content);
  console.log(`gen-openapi: wrote ${rel}`);
}
console.log(`gen-openapi: ${generated.services.map((s) => s.typeName).join(", ")}`);
if (stale > 0) process.exit(1);
