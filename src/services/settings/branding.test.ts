import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { image, patchBranding, solidPng, svgLogo } from "../../../test/branding.ts";
import {
  addMachineUser,
  addOrg,
  eventCount,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { MAX_IMAGE_BYTES } from "../../domain/settings/branding.ts";
import {
  PlatformBrandingSettings,
  ResolveBrandingSettingsResponseSchema,
  ThemeMode,
} from "../../gen/platform/settings/branding/v3alpha/branding_service_pb.ts";

// biome-ignore lint/suspicious/noExplicitAny: JSON bodies of the tests
type Settings = Record<string, any>;

describe("branding settings", () => {
  let platform: TestPlatform;
  let owner: string; // IAM_OWNER
  let instanceId: string;
  let orgId: string;
  let otherOrgId: string;
  let orgOwner: string; // ORG_OWNER of orgId
  const rest = restClient(
    () => platform,
    () => owner,
  );
  const resolve = async (query = "", token?: string) => {
    const response = await rest("GET", `/settings/v3alpha/branding${query}`, token ? { token } : {});
    assert.equal(response.status, 200, response.text);
    return response.json as { details: Settings; settings: Settings };
  };
  const assetCount = async () =>
    Number((await platform.db.query<{ n: number }>("SELECT count(*)::int AS n FROM branding_assets"))[0].n);

  before(async () => {
    platform = await startPlatform({ listen: true });
    instanceId = platform.bootstrapResult!.instanceId;
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    orgId = await addOrg(platform, "Acme");
    otherOrgId = await addOrg(platform, "Other");
    ({ token: orgOwner } = await addMachineUser(platform, {
      username: "acme-owner",
      orgId,
      membership: { contextType: "org", roles: ["ORG_OWNER"] },
    }));
  });
  after(() => platform.stop());

  it("resolves the defaults, owned by the system, before anything is set", async () => {
    const { settings } = await resolve();
    assert.deepEqual(settings.primary_color, {
      value: "#2553d8",
      owner: { type: "OWNER_TYPE_SYSTEM", id: "system" },
    });
    assert.equal(settings.font_color_dark.value, "#eef0f3");
    assert.equal(settings.theme_mode.value, "THEME_MODE_AUTO");
    assert.equal(settings.disable_watermark.value, false);
    assert.equal(settings.logo_url.value, "");
  });

  it("sets and resets colours and images in the instance", async () => {
    const png = solidPng("#cc0000");
    const patched = await patchBranding(rest, {
      primary_color: { set: "#AA0055" },
      font_color_dark: { set: "#fafafa" },
      theme_mode: { set: "THEME_MODE_DARK" },
      disable_watermark: { set: true },
      logo: image(png, "image/png"),
      icon_dark: image(svgLogo("#00aa00"), "image/svg+xml"),
    });
    assert.deepEqual((patched.json as Settings).details.owner, {
      type: "OWNER_TYPE_INSTANCE",
      id: instanceId,
    });
    let { settings } = await resolve();
    assert.deepEqual(settings.primary_color, { value: "#aa0055" }, "stored lower case, set here: no owner");
    assert.equal(settings.font_color_dark.value, "#fafafa");
    assert.equal(settings.theme_mode.value, "THEME_MODE_DARK");
    assert.equal(settings.disable_watermark.value, true);
    const sha = (await import("node:crypto")).createHash("sha256").update(png).digest("hex");
    assert.equal(settings.logo_url.value, `/assets/v3alpha/instances/${instanceId}/images/${sha}.png`);
    assert.match(settings.icon_dark_url.value, /\/images\/[0-9a-f]{64}\.svg$/);
    // the event names the image, the bytes are elsewhere
    const [event] = await platform.db.query<{ payload: Settings }>(
      "SELECT payload FROM events WHERE aggregate_type = 'settings' ORDER BY position DESC LIMIT 1",
    );
    assert.deepEqual(event.payload.set.logo, { sha256: sha, content_type: "image/png" });
    assert.ok(JSON.stringify(event.payload).length < 1000, "the event carries no bytes");

    await patchBranding(rest, {
      primary_color: { reset: true },
      logo: { reset: true },
      theme_mode: { reset: true },
    });
    ({ settings } = await resolve());
    assert.deepEqual(settings.primary_color, {
      value: "#2553d8",
      owner: { type: "OWNER_TYPE_SYSTEM", id: "system" },
    });
    assert.equal(settings.logo_url.value, "");
    assert.equal(settings.theme_mode.value, "THEME_MODE_AUTO");
    assert.equal(settings.font_color_dark.value, "#fafafa", "what was not reset stays");
    assert.match(settings.icon_dark_url.value, /\.svg$/);
  });

  it("an organization overrides the instance in part; inherited values name their owner", async () => {
    await patchBranding(rest, { background_color: { set: "#fefefe" }, warn_color: { set: "#990000" } });
    await patchBranding(rest, { background_color: { set: "#102030" } }, `?ctx.org_id=${orgId}`, orgOwner);
    const { settings, details } = await resolve(`?ctx.org_id=${orgId}`, orgOwner);
    assert.deepEqual(details.owner, { type: "OWNER_TYPE_ORG", id: orgId });
    assert.deepEqual(settings.background_color, { value: "#102030" });
    assert.deepEqual(settings.warn_color, {
      value: "#990000",
      owner: { type: "OWNER_TYPE_INSTANCE", id: instanceId },
    });
    assert.deepEqual(settings.primary_color.owner, { type: "OWNER_TYPE_SYSTEM", id: "system" });
    // the instance is unchanged, another organization inherits the instance's
    assert.equal((await resolve()).settings.background_color.value, "#fefefe");
    assert.equal((await resolve(`?ctx.org_id=${otherOrgId}`)).settings.background_color.value, "#fefefe");
    // reset in the organization: the instance's applies again
    await patchBranding(rest, { background_color: { reset: true } }, `?ctx.org_id=${orgId}`, orgOwner);
    assert.deepEqual((await resolve(`?ctx.org_id=${orgId}`)).settings.background_color, {
      value: "#fefefe",
      owner: { type: "OWNER_TYPE_INSTANCE", id: instanceId },
    });
  });

  it("Connect gives what REST gives and writes images as bytes", async () => {
    const client = createClient(
      PlatformBrandingSettings,
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1", useBinaryFormat: true }),
    );
    const headers = { authorization: `Bearer ${owner}` };
    const png = solidPng("#0000cc");
    await client.setBrandingSettings(
      {
        ctx: { context: { case: "orgId", value: orgId } },
        settings: {
          primaryColor: { value: { case: "set", value: "#123456" } },
          themeMode: { value: { case: "set", value: ThemeMode.LIGHT } },
          logoDark: { value: { case: "set", value: { content: png, contentType: "image/png" } } },
        },
      },
      { headers },
    );
    const resolved = await client.resolveBrandingSettings(
      { ctx: { context: { case: "orgId", value: orgId } } },
      { headers },
    );
    const json = toJson(ResolveBrandingSettingsResponseSchema, resolved, {
      useProtoFieldName: true,
      alwaysEmitImplicit: true,
    });
    assert.deepEqual(json, await resolve(`?ctx.org_id=${orgId}`));
    assert.equal(resolved.settings?.primaryColor?.value, "#123456");
    assert.match(resolved.settings?.logoDarkUrl?.value ?? "", /\.png$/);
    const served = await fetch(`${platform.url}${resolved.settings?.logoDarkUrl?.value}`);
    assert.deepEqual(Buffer.from(await served.arrayBuffer()), png);

    await assert.rejects(
      client.setBrandingSettings(
        { settings: { warnColor: { value: { case: "set", value: "red" } } } },
        { headers },
      ),
      (error) =>
        error instanceof ConnectError &&
        error.code === Code.InvalidArgument &&
        error.rawMessage === "settings.warn_color.set: must be a colour #rrggbb",
    );
  });

  /** A refused PATCH: 400 INVALID_ARGUMENT naming the field, no event, no image stored. */
  async function refused(json: Record<string, unknown>, field: string, query = "") {
    const [events, assets] = [await eventCount(platform), await assetCount()];
    const response = await rest("PATCH", `/settings/v3alpha/branding${query}`, { json });
    assert.equal(response.status, 400, response.text);
    const body = response.json as { code: number; message: string };
    assert.equal(body.code, 3);
    assert.ok(body.message.startsWith(`${field}: `), body.message);
    assert.equal(await eventCount(platform), events);
    assert.equal(await assetCount(), assets);
    return body.message;
  }

  it("refuses invalid colours and theme modes, storing nothing", async () => {
    for (const bad of ["red", "#abc", "#12345g", "#1234567", " #123456", ""])
      await refused(
        {
          primary_color: { set: "#111111" },
          font_color_dark: { set: bad },
          logo: image(solidPng("#010101"), "image/png"),
        },
        "settings.font_color_dark.set",
      );
    await refused({ theme_mode: { set: "THEME_MODE_UNSPECIFIED" } }, "settings.theme_mode.set");
  });

  it("takes images up to 512 KiB exactly, and refuses one byte more", async () => {
    const padded = (size: number) => {
      const content = Buffer.alloc(size, 0x20);
      solidPng("#336699").copy(content); // a PNG signature first, then filler
      return content;
    };
    const edge = padded(MAX_IMAGE_BYTES);
    const response = await patchBranding(rest, { icon: image(edge, "image/png") });
    assert.equal(response.status, 200);
    const url = (await resolve()).settings.icon_url.value;
    const served = await fetch(`${platform.url}${url}`);
    assert.equal(Number(served.headers.get("content-length")), MAX_IMAGE_BYTES);
    const message = await refused(
      { icon: image(padded(MAX_IMAGE_BYTES + 1), "image/png") },
      "settings.icon.set",
    );
    assert.match(message, /524289 bytes, more than the 524288 bytes/);
    assert.equal((await resolve()).settings.icon_url.value, url, "the earlier icon stays");
  });

  it("refuses images whose bytes are not of their content type, and other types", async () => {
    const png = solidPng("#445566");
    const jpeg = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46, 0x49, 0x46, 0]);
    const webp = Buffer.concat([Buffer.from("RIFF"), Buffer.from([4, 0, 0, 0]), Buffer.from("WEBPVP8 ")]);
    await refused({ logo: image(png, "image/jpeg") }, "settings.logo.set");
    await refused({ logo: image(jpeg, "image/png") }, "settings.logo.set");
    await refused({ logo_dark: image(png, "image/webp") }, "settings.logo_dark.set");
    await refused({ icon: image(png, "image/svg+xml") }, "settings.icon.set");
    await refused({ icon: image(png, "image/gif") }, "settings.icon.set");
    await refused({ icon: image(Buffer.alloc(0), "image/png") }, "settings.icon.set");
    const notSvg = [
      "<html><body>no</body></html>",
      '<svg xmlns="http://www.w3.org/2000/svg"><rect></svg>',
      '<svg xmlns="http://www.w3.org/2000/svg"><rect/></svg><svg xmlns="http://www.w3.org/2000/svg"/>',
      "<svg><rect/></svg>",
      '<!DOCTYPE svg [<!ENTITY a "aaaa">]><svg xmlns="http://www.w3.org/2000/svg">&a;</svg>',
      '<svg xmlns="http://www.w3.org/2000/svg" width=10></svg>',
      '<svg xmlns="http://www.w3.org/2000/svg"><text>a & b</text></svg>',
    ];
    for (const svg of notSvg)
      await refused({ logo: image(Buffer.from(svg), "image/svg+xml") }, "settings.logo.set");
    // the accepted forms
    await patchBranding(rest, {
      logo: image(jpeg, "image/jpeg"),
      logo_dark: image(webp, "image/webp"),
      icon: image(
        Buffer.from(
          '\uFEFF<svg xmlns="http://www.w3.org/2000/svg"><![CDATA[x]]><text>&amp;&#65;</text></svg>\n',
        ),
        "image/svg+xml",
      ),
    });
  });

  it("permissions: ORG_OWNER changes its organization only; reading needs authentication", async () => {
    const events = await eventCount(platform);
    const other = await rest("PATCH", `/settings/v3alpha/branding?ctx.org_id=${otherOrgId}`, {
      token: orgOwner,
      json: { primary_color: { set: "#000000" } },
    });
    assert.equal(other.status, 403);
    const instance = await rest("PATCH", "/settings/v3alpha/branding", {
      token: orgOwner,
      json: { primary_color: { set: "#000000" } },
    });
    assert.equal(instance.status, 403);
    assert.equal(await eventCount(platform), events);
    assert.equal((await rest("GET", "/settings/v3alpha/branding", { token: null })).status, 401);
    assert.equal((await rest("GET", "/settings/v3alpha/branding", { token: "nope" })).status, 401);
    const { token: nobody } = await addMachineUser(platform, { username: "reader" });
    assert.equal((await rest("GET", "/settings/v3alpha/branding", { token: nobody })).status, 200);
    const denied = await rest("PATCH", "/settings/v3alpha/branding", {
      token: nobody,
      json: { primary_color: { set: "#000000" } },
    });
    assert.equal(denied.status, 403);
  });
});
