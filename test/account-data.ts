/**
 * A user schema with every kind of property the account page draws (text, enum, boolean, integer, a
 * nested object, one the user may only read, one it may not see), and a user's data for it: the account
 * page's Chromium test and screenshots (test/account-browser.test.ts, scripts/login-screenshots.ts).
 */
import assert from "node:assert/strict";
import { addMachineUser, restClient } from "./helpers.ts";
import type { LoginTestPlatform } from "./login.ts";

const PERMISSION = "urn:platform:schema:permission";
const SELF_RW = { [PERMISSION]: { owner: "rw", self: "rw" } };

export const MEMBER_SCHEMA = {
  type: "object",
  properties: {
    customer_number: {
      type: "string",
      title: "Customer number",
      description: "Given by our support team.",
    },
    membership: { type: "string", title: "Membership", enum: ["basic", "plus", "premium"], ...SELF_RW },
    newsletter: {
      type: "boolean",
      title: "Monthly newsletter",
      description: "News about your membership by e-mail.",
      ...SELF_RW,
    },
    birth_year: { type: "integer", title: "Year of birth", minimum: 1900, maximum: 2100, ...SELF_RW },
    address: {
      type: "object",
      title: "Postal address",
      ...SELF_RW,
      properties: {
        street: { type: "string", title: "Street and number", maxLength: 100 },
        zip: { type: "string", title: "Postal code", pattern: "^[0-9]{4}$" },
        city: { type: "string", title: "City", maxLength: 100 },
      },
    },
    internal_note: { type: "string", title: "Internal note", [PERMISSION]: { owner: "rw", self: "" } },
  },
  required: ["customer_number"],
  additionalProperties: false,
};

export const MEMBER_DATA = {
  customer_number: "M-1042",
  membership: "plus",
  newsletter: false,
  address: { street: "Seestrasse 12", zip: "8002", city: "Zürich" },
  internal_note: "prefers phone calls",
};

/** Creates the schema (once per platform) and gives it to `userId` with `data`. */
export async function giveMemberData(
  platform: LoginTestPlatform,
  userId: string,
  data: Record<string, unknown> = MEMBER_DATA,
): Promise<void> {
  const state = platform as LoginTestPlatform & { memberSchema?: { id: string; token: string } };
  if (!state.memberSchema) {
    const { token } = await addMachineUser(platform, {
      username: "schema-admin",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
    const created = await restClient(platform)("POST", "/resources/v3alpha/user_schemas", {
      token,
      json: { type: "member", schema: MEMBER_SCHEMA },
    });
    assert.equal(created.status, 201, created.text);
    state.memberSchema = { id: created.json.details.id, token };
  }
  const { id, token } = state.memberSchema;
  const patched = await restClient(platform)("PATCH", `/resources/v3alpha/users/${userId}`, {
    token,
    json: { schema_id: id, data },
  });
  assert.equal(patched.status, 200, patched.text);
}
