/**
 * The account page's custom data section over HTTP (Chromium fills it in test/account-browser.test.ts):
 * drawn from the user's schema as the `self` field permissions allow, saved through PatchUser's decision
 * (read back through the users API), errors at their field, forged writes refused, nothing stored then.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { addMachineUser, eventCount, restClient } from "../../test/helpers.ts";
import {
  addHuman,
  alertOf,
  formOf,
  HttpBrowser,
  type LoginTestPlatform,
  startLoginPlatform,
} from "../../test/login.ts";

const PASSWORD = "Secret-Passw0rd!";
const USERS = "/resources/v3alpha/users";
const SCHEMAS = "/resources/v3alpha/user_schemas";
const ACTION = "/ui/login/account/data";
const PERMISSION = "urn:platform:schema:permission";
const SELF_RW = { [PERMISSION]: { owner: "rw", self: "rw" } };

/** Every kind of property the form draws, with a read-only and a hidden one. */
export const ACCOUNT_DATA_SCHEMA = {
  type: "object",
  properties: {
    customer_number: { type: "string", title: "Customer number" },
    tier: { type: "string", title: "Tier", enum: ["bronze", "silver", "gold"], ...SELF_RW },
    newsletter: {
      type: "boolean",
      title: "Newsletter <script>alert(1)</script>",
      description: "Monthly <b>news</b>",
      ...SELF_RW,
    },
    shoe_size: { type: "integer", title: "Shoe size", minimum: 1, ...SELF_RW },
    address: {
      type: "object",
      title: "Address",
      ...SELF_RW,
      properties: {
        street: { type: "string", title: "Street", maxLength: 100 },
        zip: { type: "string", title: "ZIP code", pattern: "^[0-9]{4}$" },
      },
    },
    internal_note: { type: "string", title: "Internal note", [PERMISSION]: { owner: "rw", self: "" } },
  },
  required: ["customer_number"],
  additionalProperties: false,
};

export const ACCOUNT_DATA = {
  customer_number: "C-7",
  tier: "silver",
  newsletter: true,
  shoe_size: 42,
  address: { street: "Main 1", zip: "8000" },
  internal_note: "VIP-SECRET",
};

describe("account page: custom data", () => {
  let platform: LoginTestPlatform;
  let owner: string;
  let schemaId: string;
  const rest = restClient(
    () => platform,
    () => owner,
  );

  before(async () => {
    platform = await startLoginPlatform();
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    const created = await rest("POST", SCHEMAS, { json: { type: "customer", schema: ACCOUNT_DATA_SCHEMA } });
    assert.equal(created.status, 201, created.text);
    schemaId = created.json.details.id;
  });
  after(() => platform.stop());

  /** A user with the schema and its data, signed in; answers its ID, the browser and the account page. */
  async function customer(username: string, data: Record<string, unknown> = ACCOUNT_DATA) {
    const id = await addHuman(platform, username, PASSWORD);
    const patched = await rest("PATCH", `${USERS}/${id}`, { json: { schema_id: schemaId, data } });
    assert.equal(patched.status, 200, patched.text);
    const browser = new HttpBrowser(platform.url);
    const loginPage = await browser.follow("/ui/login/loginname");
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName: username });
    const page = await browser.submit(passwordPage, "/ui/login/password", { password: PASSWORD });
    assert.equal(page.status, 200, page.text);
    return { id, browser, page };
  }
  /** The stored document, as the administrators read it. */
  const dataOf = async (id: string) => (await rest("GET", `${USERS}/${id}`)).json.user.data;
  const section = (html: string) => {
    const start = html.indexOf('<section aria-labelledby="data-title">');
    return start < 0 ? undefined : html.slice(start, html.indexOf("</section>", start));
  };
  /** The form field's id for a property (by its JSON pointer). */
  const idOf = (html: string, pointer: string) =>
    new RegExp(`id="([^"]+)" name="${pointer}"`).exec(html)?.[1];
  const fieldError = (html: string, id: string) =>
    new RegExp(`<p class="field-error" id="${id}-error">([^<]*)</p>`).exec(html)?.[1];
  const notice = (html: string) => /<div class="notice" role="status">([^<]*)<\/div>/.exec(html)?.[1];

  it("shows what the user may read, as inputs what it may write, never what is hidden", async () => {
    const { page } = await customer("clara");
    const html = section(page.text);
    assert.ok(html, "the page has the section");
    assert.match(html, /<h2 id="data-title">Additional information<\/h2>/);
    // read-only: text, no input
    assert.match(html, /<span class="data-label" id="[^"]+">Customer number<\/span>/);
    assert.match(html, />C-7<\/p>/);
    assert.doesNotMatch(html, /name="\/customer_number"/);
    // hidden: nowhere
    assert.doesNotMatch(page.text, /Internal note|VIP-SECRET|internal_note/);
    // writable: inputs of their type, with the schema's constraints
    assert.match(html, /<select id="[^"]+" name="\/tier"[^>]*>/);
    assert.match(html, /<option value="&quot;silver&quot;" selected>silver<\/option>/);
    assert.match(html, /name="\/newsletter" type="checkbox" value="true" checked/);
    assert.match(html, /name="\/shoe_size" type="number" step="1" inputmode="numeric" min="1" value="42"/);
    assert.match(html, /<fieldset class="data-group">\n<legend>Address<\/legend>/);
    assert.match(html, /name="\/address\/street" type="text" maxlength="100" value="Main 1"/);
    assert.match(html, /name="\/address\/zip" type="text" pattern="\^\[0-9\]\{4\}\$" value="8000"/);
    // administrator texts are escaped
    assert.match(html, /Newsletter &lt;script&gt;alert\(1\)&lt;\/script&gt;/);
    assert.doesNotMatch(page.text, /<script>alert/);
    assert.match(html, /<p class="help" id="[^"]+-help">Monthly &lt;b&gt;news&lt;\/b&gt;<\/p>/);
  });

  it("saves the form through PatchUser's decision: unchecked box false, empty optional input removed", async () => {
    const { id, browser, page } = await customer("carl");
    const saved = await browser.submit(page, ACTION, {
      "/tier": '"gold"',
      "/shoe_size": "44",
      "/address/street": "",
      "/address/zip": "3000",
      // no "/newsletter": the box is unchecked
    });
    assert.equal(saved.status, 200);
    assert.equal(notice(saved.text), "Your information was saved.");
    assert.deepEqual(await dataOf(id), {
      customer_number: "C-7",
      tier: "gold",
      newsletter: false,
      shoe_size: 44,
      address: { zip: "3000" },
      internal_note: "VIP-SECRET",
    });
    const [event] = await platform.db.query<{ creator: string }>(
      "SELECT creator FROM events WHERE aggregate_id = $1 AND event_type = 'user.data.set' ORDER BY position DESC LIMIT 1",
      [id],
    );
    assert.equal(event?.creator, id, "the user itself changed it");
    assert.match(section(saved.text) ?? "", /name="\/newsletter" type="checkbox" value="true"(?! checked)/);
    // the same values again: nothing to store
    const before = await eventCount(platform);
    const again = await browser.submit(saved, ACTION, {
      "/tier": '"gold"',
      "/shoe_size": "44",
      "/address/street": "",
      "/address/zip": "3000",
    });
    assert.equal(notice(again.text), "Nothing was changed.");
    assert.equal(await eventCount(platform), before);
  });

  it("shows an invalid value at its field, with the values typed, and stores nothing", async () => {
    const { id, browser, page } = await customer("cora");
    const before = await eventCount(platform);
    const posted = await browser.post(ACTION, {
      ...formOf(page.text, ACTION),
      "/tier": '"silver"',
      "/newsletter": "true",
      "/shoe_size": "forty",
      "/address/street": "Main 1",
      "/address/zip": "8000",
    });
    assert.equal(posted.status, 303);
    const shown = await browser.follow(posted.location!);
    assert.equal(await eventCount(platform), before, "nothing stored");
    assert.deepEqual(await dataOf(id), ACCOUNT_DATA);
    assert.equal(alertOf(shown.text), "Please correct the marked fields.");
    const shoe = idOf(shown.text, "/shoe_size")!;
    assert.equal(fieldError(shown.text, shoe), "Enter a whole number.");
    assert.match(
      shown.text,
      new RegExp(
        `id="${shoe}" name="/shoe_size"[^>]*value="forty" aria-describedby="${shoe}-error" aria-invalid="true" autofocus`,
      ),
    );

    // a nested problem is shown at the nested field
    const zipPost = await browser.post(ACTION, {
      ...formOf(shown.text, ACTION),
      "/tier": '"silver"',
      "/newsletter": "true",
      "/shoe_size": "42",
      "/address/zip": "80",
    });
    const zipShown = await browser.follow(zipPost.location!);
    assert.equal(fieldError(zipShown.text, idOf(zipShown.text, "/address/zip")!), "This value is not valid.");
    assert.equal(await eventCount(platform), before, "nothing stored");
    assert.deepEqual(await dataOf(id), ACCOUNT_DATA);
  });

  it("refuses a forged write to a read-only or hidden property, storing nothing", async () => {
    const { id, browser, page } = await customer("cyril");
    const form = formOf(page.text, ACTION);
    const before = await eventCount(platform);
    const valid = { "/tier": '"silver"', "/newsletter": "true", "/shoe_size": "42" };
    const readOnly = await browser.post(ACTION, { ...form, ...valid, "/customer_number": "C-1" });
    assert.equal(readOnly.status, 303);
    const shown = await browser.follow(readOnly.location!);
    assert.equal(alertOf(shown.text), "Please correct the marked fields.");
    assert.match(
      section(shown.text) ?? "",
      /<p class="field-error" id="[^"]+">You may not change this value. Nothing was changed.<\/p>/,
    );
    const hidden = await browser.post(ACTION, { ...form, ...valid, "/internal_note": "" });
    const hiddenShown = await browser.follow(hidden.location!);
    assert.equal(alertOf(hiddenShown.text), "You may not change this value. Nothing was changed.");
    assert.equal(await eventCount(platform), before, "nothing stored");
    assert.deepEqual(await dataOf(id), ACCOUNT_DATA);
  });

  it("shows no section to a user without a schema", async () => {
    await addHuman(platform, "nina", PASSWORD);
    const browser = new HttpBrowser(platform.url);
    const loginPage = await browser.follow("/ui/login/loginname");
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName: "nina" });
    const page = await browser.submit(passwordPage, "/ui/login/password", { password: PASSWORD });
    assert.match(page.text, /<h1 id="page-title">Your account<\/h1>/);
    assert.equal(section(page.text), undefined);
    assert.doesNotMatch(page.text, /account\/data/);
    // a post anyway: refused, nothing stored
    const before = await eventCount(platform);
    const posted = await browser.post(ACTION, {
      ...formOf(page.text, "/ui/login/account/profile"),
      "/x": "1",
    });
    assert.equal(posted.status, 303);
    const shown = await browser.follow(posted.location!);
    assert.equal(
      alertOf(shown.text),
      "Your account has no additional information any more. Nothing was changed.",
    );
    assert.equal(await eventCount(platform), before);
  });
});
