// `npm run demo`: the demo relying party (./rp.ts) against a running Platform.
//   PLATFORM_URL   the Platform instance (default http://localhost:8080; its issuer)
//   DEMO_PORT      the demo's port (default 3000)
//   DEMO_PAT       an administrator's personal access token (`platform admin-token --out -` makes one), or
//   PLATFORM_FIRSTINSTANCE_PAT_PATH   the file the first start wrote it to (only needed on the first run)
//   DEMO_STATE_FILE   where the app's client ID and secret are kept (default ./.demo-client.json)
import { existsSync, readFileSync } from "node:fs";
import { startDemo } from "./rp.ts";

const patPath = process.env.PLATFORM_FIRSTINSTANCE_PAT_PATH;
const pat =
  process.env.DEMO_PAT ?? (patPath && existsSync(patPath) ? readFileSync(patPath, "utf8").trim() : undefined);
const platformUrl = (process.env.PLATFORM_URL ?? "http://localhost:8080").replace(/\/+$/, "");
try {
  const demo = await startDemo({
    platformUrl,
    port: Number(process.env.DEMO_PORT ?? 3000),
    stateFile: process.env.DEMO_STATE_FILE ?? ".demo-client.json",
    pat,
  });
  console.log(`Demo relying party at ${demo.url} (client ${demo.clientId} of ${platformUrl})`);
  const stop = () => demo.close().then(() => process.exit(0));
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
} catch (error) {
  console.error(`demo: ${(error as Error).message}`);
  process.exit(1);
}
