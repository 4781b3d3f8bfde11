// Child process of test/disk-full.test.ts: opens the embedded database in the directory given as first
// argument with the free-space guard off, commits a row, fills the disk with the file given as second
// argument, and makes PostgreSQL start a new write-ahead log segment, which cannot fit: a PANIC. Prints
// "committed" after the first commit; exits 2 when the PANIC did not stop the process.
import { closeSync, openSync, writeSync } from "node:fs";
import { PgliteDatabase } from "../src/storage/pglite.ts";

const [dataDir, filler] = process.argv.slice(2);
if (!dataDir || !filler) throw new Error("usage: pglite-wal-panic.ts DATA_DIR FILLER");
const db = await PgliteDatabase.open(dataDir, { minFreeBytes: 0 });
await db.exec("CREATE TABLE before_panic (note text); INSERT INTO before_panic VALUES ('committed')");
process.stdout.write("committed\n");

const fd = openSync(filler, "w");
for (const size of [1 << 20, 4096, 512]) {
  const chunk = Buffer.alloc(size, 1);
  try {
    for (;;) writeSync(fd, chunk);
  } catch {
    // full at this size; try a smaller one
  }
}
closeSync(fd);

try {
  await db.transaction(async (tx) => {
    await tx.query("SELECT pg_switch_wal()");
    await tx.query("INSERT INTO before_panic VALUES ('never acknowledged')");
  });
  process.stdout.write("no panic: committed\n");
} catch (error) {
  process.stdout.write(`no panic: ${(error as Error).message}\n`);
}
process.exit(2);
