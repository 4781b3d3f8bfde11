#!/usr/bin/env node
// Runs the TypeScript sources directly (tsx compiles on load); `npm run build` type-checks them.
import { register } from "tsx/esm/api";

register();
const { main } = await import("../src/cli.ts");
process.exitCode = await main(process.argv.slice(2));
