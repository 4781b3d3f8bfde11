// Writes docs/permissions.md from the role → permission table of src/auth/permissions.ts, the one place it
// is enforced (`--check` only reports whether the committed file is current).
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { renderPermissionsDoc } from "../src/auth/permissions-doc.ts";

const file = path.resolve(import.meta.dirname, "../docs/permissions.md");
const fresh = renderPermissionsDoc();
if (process.argv.includes("--check")) {
  const current = readFileSync(file, "utf8");
  if (current !== fresh) {
    console.error("docs/permissions.md is stale: run npm run generate");
    process.exit(1);
  }
} else {
  writeFileSync(file, fresh);
  console.log("gen-permissions-doc: wrote docs/permissions.md");
}
