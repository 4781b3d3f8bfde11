import { type Config, resolveMasterKey } from "../config.ts";
import { EventStore } from "../eventstore/eventstore.ts";
import { SigningKeys } from "../oidc/keys.ts";
import { projections } from "../query/projections/index.ts";
import { CommandError, openForCommand } from "./database.ts";

/** `platform keys rotate`: a new signing key for each instance (or one), signing from now on. */
export async function rotateKeys(config: Config, instanceId: string | undefined): Promise<string[]> {
  if (config.databaseUrl) resolveMasterKey(config); // fails before connecting when the key is missing
  const db = await openForCommand(
    config,
    "rotate through its web keys API instead (POST /resources/v3alpha/web_keys, then POST /resources/v3alpha/web_keys/{id}/_activate; docs/oidc.md), or stop it first",
  );
  try {
    const eventStore = new EventStore(db, projections);
    const keys = new SigningKeys(db, resolveMasterKey(config), eventStore);
    await keys.checkMasterKey();
    const instances = (
      await db.query<{ id: string }>(
        instanceId === undefined
          ? "SELECT id FROM instances ORDER BY created_at"
          : "SELECT id FROM instances WHERE id = $1",
        instanceId === undefined ? [] : [instanceId],
      )
    ).map((row) => row.id);
    if (instanceId !== undefined && instances.length === 0)
      throw new CommandError(`no instance ${instanceId}`);
    const lines: string[] = [];
    for (const id of instances) {
      const key = await keys.rotate(id);
      lines.push(`instance ${id}: signing with key ${key.kid}`);
    }
    await eventStore.broadcast.flushed(); // running servers sign with the new keys at once
    return lines;
  } finally {
    await db.close();
  }
}
