// Writes a migrated, empty embedded database to the directory given as argument (see scripts/test.mjs).

import { migrate } from "../src/storage/migrate.ts";
import { PgliteDatabase } from "../src/storage/pglite.ts";

const dir = process.argv[2];
if (!dir) throw new Error("usage: make-template.ts DIR");
const db = await PgliteDatabase.open(dir);
await migrate(db);
await db.close();
