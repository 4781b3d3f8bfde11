// Child process of PgliteDatabase.open: creates a new embedded database in the directory given as argument
// and exits, so that initdb's memory peak never stays in the server (see initializeInChildProcess).
import { initializeDataDir } from "./pglite.ts";

const pgdata = process.argv[2];
if (!pgdata) throw new Error("usage: pglite-initialize.ts PGDATA");
await initializeDataDir(pgdata);
