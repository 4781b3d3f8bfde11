import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { eventTypes } from "../domain/catalogue.ts";

describe("executions: the event catalogue of docs/actions.md", () => {
  it("lists every event type, and only those", () => {
    const doc = readFileSync(new URL("../../docs/actions.md", import.meta.url), "utf8");
    const section = doc.slice(doc.indexOf("### Event catalogue"), doc.indexOf("### Safety"));
    const table = section.split("\n").filter((line) => /^\| `[a-z_]+` \|/.test(line));
    const listed = table.flatMap((line) => [...line.split("|")[2].matchAll(/`([^`]+)`/g)].map((m) => m[1]));
    assert.deepEqual(
      eventTypes.filter((t) => !listed.includes(t)),
      [],
      "event types missing in docs/actions.md",
    );
    assert.deepEqual(
      listed.filter((t) => !eventTypes.includes(t)),
      [],
      "documented event types that do not exist",
    );
    for (const line of table) {
      const aggregate = /^\| `([a-z_]+)` \|/.exec(line)![1];
      for (const [, type] of line.split("|")[2].matchAll(/`([^`]+)`/g))
        assert.ok(type.startsWith(`${aggregate}.`), `${type} is listed under ${aggregate}`);
    }
  });
});
