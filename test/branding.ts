/**
 * Support of the branding tests: images (a real PNG of one colour, an SVG logo, an SVG with a script),
 * and setting branding through the REST API.
 */
import assert from "node:assert/strict";
import { crc32, deflateSync } from "node:zlib";
import type { RestCall } from "./helpers.ts";

function chunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body) >>> 0);
  return Buffer.concat([length, body, crc]);
}

/** A PNG of `width` × `height` pixels of one colour (`#rrggbb`). */
export function solidPng(color: string, width = 4, height = 4): Buffer {
  const [r, g, b] = [1, 3, 5].map((i) => Number.parseInt(color.slice(i, i + 2), 16));
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8 bits, RGB
  const row = Buffer.concat([
    Buffer.from([0]),
    Buffer.from(Array.from({ length: width }, () => [r, g, b]).flat()),
  ]);
  const pixels = Buffer.concat(Array.from({ length: height }, () => row));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", header),
    chunk("IDAT", deflateSync(pixels)),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

/** An SVG logo: a word on a rounded box of `color`. */
export function svgLogo(color: string, word = "Acme"): Buffer {
  return Buffer.from(
    `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="160" height="40" viewBox="0 0 160 40">
  <!-- test logo -->
  <rect x="0" y="0" width="40" height="40" rx="8" fill="${color}"/>
  <text x="50" y="28" font-family="sans-serif" font-size="22" font-weight="700" fill="${color}">${word}</text>
</svg>
`,
  );
}

/** An SVG whose script sets `window.svgRan` and requests `beacon` (a URL the test watches). */
export function svgWithScript(beacon: string): Buffer {
  return Buffer.from(
    `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10" fill="#123456"/><script>window.svgRan = true; fetch("${beacon}"); new Image().src = "${beacon}?img";</script></svg>`,
  );
}

export const image = (content: Buffer, contentType: string) => ({
  set: { content: content.toString("base64"), content_type: contentType },
});

/** PATCH /settings/v3alpha/branding (with `query`, e.g. `?ctx.org_id=…`); asserts 200. */
export async function patchBranding(
  rest: RestCall,
  json: Record<string, unknown>,
  query = "",
  token?: string,
) {
  const response = await rest("PATCH", `/settings/v3alpha/branding${query}`, {
    json,
    ...(token ? { token } : {}),
  });
  assert.equal(response.status, 200, response.text);
  return response;
}
