import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { mergePatch, readableData, schemaProperties, unwritableChange } from "./field-access.ts";

const P = "urn:platform:schema:permission";
const schema = {
  type: "object",
  properties: {
    name: { type: "string", title: "Name" },
    tier: { type: "string", enum: ["basic", "gold"], [P]: { owner: "rw", self: "" } },
    newsletter: { type: "boolean", [P]: { owner: "r", self: "rw" } },
    address: {
      type: "object",
      title: "Address",
      [P]: { owner: "rw", self: "rw" },
      properties: {
        street: { type: "string" },
        verified: { type: "boolean", [P]: { owner: "rw", self: "r" } },
      },
      required: ["street"],
    },
    pin: { type: ["string", "null"], [P]: { owner: "", self: "w" } },
  },
  required: ["name"],
};

describe("field permissions of user schemas", () => {
  it("schemaProperties: what the user may read or write, with type, title, enum, nested objects and values", () => {
    const data = { name: "Ada", tier: "gold", address: { street: "Main 1", verified: true }, pin: "1234" };
    assert.deepEqual(schemaProperties(schema, data, "self"), [
      {
        name: "name",
        pointer: "/name",
        required: true,
        readable: true,
        writable: false,
        type: "string",
        title: "Name",
        value: "Ada",
      },
      {
        name: "newsletter",
        pointer: "/newsletter",
        required: false,
        readable: true,
        writable: true,
        type: "boolean",
      },
      {
        name: "address",
        pointer: "/address",
        required: false,
        readable: true,
        writable: true,
        type: "object",
        title: "Address",
        properties: [
          {
            name: "street",
            pointer: "/address/street",
            required: true,
            readable: true,
            writable: true,
            type: "string",
            value: "Main 1",
          },
          {
            name: "verified",
            pointer: "/address/verified",
            required: false,
            readable: true,
            writable: false,
            type: "boolean",
            value: true,
          },
        ],
      },
      // write-only: offered without its value
      {
        name: "pin",
        pointer: "/pin",
        required: false,
        readable: false,
        writable: true,
        type: ["string", "null"],
      },
    ]);
    const forOwner = schemaProperties(schema, data, "owner").map((p) => [p.name, p.readable, p.writable]);
    assert.deepEqual(forOwner, [
      ["name", true, true],
      ["tier", true, true],
      ["newsletter", true, false],
      ["address", true, true],
    ]);
    assert.deepEqual(schemaProperties(schema, undefined, "owner")[1].enum, ["basic", "gold"]);
  });

  it("readableData leaves out what the role may not read, at any depth; undeclared data has the enclosing permission", () => {
    const data = {
      name: "Ada",
      tier: "gold",
      extra: 1,
      address: { street: "x", verified: false, note: "n" },
      pin: "1",
    };
    assert.deepEqual(readableData(schema, data, "self"), {
      name: "Ada",
      extra: 1,
      address: { street: "x", verified: false, note: "n" },
    });
    assert.deepEqual(readableData(schema, data, "owner"), {
      name: "Ada",
      tier: "gold",
      extra: 1,
      address: { street: "x", verified: false, note: "n" },
    });
  });

  it("unwritableChange names the first changed property the role may not write; unchanged ones do not count", () => {
    const before = { name: "Ada", address: { street: "x", verified: true } };
    assert.equal(unwritableChange(schema, before, { ...before, newsletter: true }, "self"), undefined);
    assert.equal(unwritableChange(schema, before, { ...before, name: "Bea" }, "self"), "/name");
    assert.equal(
      unwritableChange(schema, before, { ...before, address: { street: "y", verified: true } }, "self"),
      undefined,
    );
    assert.equal(
      unwritableChange(schema, before, { ...before, address: { street: "x", verified: false } }, "self"),
      "/address/verified",
    );
    // replacing the object removes verified: not the user's to write
    assert.equal(
      unwritableChange(schema, before, { ...before, address: "gone" }, "self"),
      "/address/verified",
    );
    assert.equal(
      unwritableChange(schema, undefined, { name: "Ada", newsletter: false }, "owner"),
      "/newsletter",
    );
    // key order does not make a change (jsonb reorders members)
    assert.equal(
      unwritableChange(schema, { address: { verified: true, street: "x" } }, before, "self"),
      "/name",
    );
  });

  it("mergePatch follows RFC 7396", () => {
    assert.deepEqual(
      mergePatch({ a: 1, b: { c: 2, d: 3 }, e: [1] }, { a: null, b: { c: null, f: 4 }, e: [2] }),
      {
        b: { d: 3, f: 4 },
        e: [2],
      },
    );
    assert.deepEqual(mergePatch({ a: "x" }, { a: { b: null, c: 1 } }), { a: { c: 1 } });
  });
});
