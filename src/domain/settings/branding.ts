/**
 * Branding settings (category `branding`, docs/branding.md): the colours, theme and images of the login UI
 * and of the HTML messages. Stored values: colours as lower-case `#rrggbb`, the theme mode as `auto`,
 * `light` or `dark`, the flags as booleans, and each image as `{sha256, content_type}`: the bytes are rows
 * of `branding_assets` (instance, SHA-256) written in the transaction of the change, never in an event.
 */
import { createHash } from "node:crypto";
import type { EventStore } from "../../eventstore/eventstore.ts";
import { changeSettings, type SettingsVersion } from "./commands.ts";
import type { SettingsOwner } from "./events.ts";
import { isSvgDocument } from "./svg.ts";

export const BRANDING = "branding";

export const COLOR_KEYS = [
  "primary_color",
  "background_color",
  "warn_color",
  "font_color",
  "primary_color_dark",
  "background_color_dark",
  "warn_color_dark",
  "font_color_dark",
] as const;
export type ColorKey = (typeof COLOR_KEYS)[number];

export const BRANDING_FLAGS = ["hide_login_name_suffix", "disable_watermark"] as const;
export type BrandingFlag = (typeof BRANDING_FLAGS)[number];

export const IMAGE_KEYS = ["logo", "logo_dark", "icon", "icon_dark"] as const;
export type ImageKey = (typeof IMAGE_KEYS)[number];

export const THEME_MODES = ["auto", "light", "dark"] as const;
export type ThemeMode = (typeof THEME_MODES)[number];

/** An image as the settings store it. */
export interface StoredImage {
  sha256: string;
  content_type: ImageType;
}

/**
 * The colours in force where no context sets one: the login UI's own (src/login/assets/login.css), so an
 * unbranded login and the resolved settings agree.
 */
export const brandingColorDefaults: Record<ColorKey, string> = {
  primary_color: "#2553d8",
  background_color: "#ffffff",
  warn_color: "#b42318",
  font_color: "#111827",
  primary_color_dark: "#86a8ff",
  background_color_dark: "#171b21",
  warn_color_dark: "#ffaaa2",
  font_color_dark: "#eef0f3",
};

export const brandingFlagDefaults: Record<BrandingFlag, boolean> = {
  hide_login_name_suffix: false,
  disable_watermark: false,
};

export const themeModeDefault: ThemeMode = "auto";

/** `#rrggbb` (either case) as lower case; undefined for anything else. */
export function normalColor(value: string): string | undefined {
  return /^#[0-9a-fA-F]{6}$/.test(value) ? value.toLowerCase() : undefined;
}

/** Largest image: 512 KiB. */
export const MAX_IMAGE_BYTES = 512 * 1024;

export const IMAGE_TYPES = ["image/png", "image/jpeg", "image/webp", "image/svg+xml"] as const;
export type ImageType = (typeof IMAGE_TYPES)[number];

export const IMAGE_EXTENSIONS: Record<ImageType, string> = {
  "image/png": "png",
  "image/jpeg": "jpg",
  "image/webp": "webp",
  "image/svg+xml": "svg",
};

const startsWith = (bytes: Uint8Array, prefix: readonly number[], at = 0) =>
  bytes.length >= at + prefix.length && prefix.every((b, i) => bytes[at + i] === b);

const ascii = (text: string) => [...text].map((c) => c.charCodeAt(0));

/** Whether the bytes are of the type: the file signature for raster images, SVG XML for SVG. */
function hasTypeOf(content: Uint8Array, type: ImageType): boolean {
  switch (type) {
    case "image/png":
      return startsWith(content, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    case "image/jpeg":
      return startsWith(content, [0xff, 0xd8, 0xff]);
    case "image/webp":
      return startsWith(content, ascii("RIFF")) && startsWith(content, ascii("WEBP"), 8);
    case "image/svg+xml": {
      let text: string;
      try {
        text = new TextDecoder("utf-8", { fatal: true }).decode(content);
      } catch {
        return false;
      }
      return isSvgDocument(text);
    }
  }
}

/** Why an image cannot be a branding image (a message for its field), or undefined when it can. */
export function imageProblem(content: Uint8Array, contentType: string): string | undefined {
  if (!(IMAGE_TYPES as readonly string[]).includes(contentType))
    return `content_type must be one of ${IMAGE_TYPES.join(", ")}`;
  if (content.length === 0) return "content is required";
  if (content.length > MAX_IMAGE_BYTES)
    return `content is ${content.length} bytes, more than the ${MAX_IMAGE_BYTES} bytes (512 KiB) allowed`;
  if (!hasTypeOf(content, contentType as ImageType))
    return contentType === "image/svg+xml"
      ? "content is not an SVG document (UTF-8 XML whose root element is svg, without DOCTYPE)"
      : `content is not ${contentType} (its first bytes are not that format's signature)`;
  return undefined;
}

/** An image of a change: its bytes (checked with `imageProblem`) and type. */
export interface NewImage {
  content: Uint8Array;
  contentType: ImageType;
}

export const sha256Hex = (content: Uint8Array) => createHash("sha256").update(content).digest("hex");

export interface BrandingChange {
  owner: SettingsOwner;
  instanceId: string;
  /** Colours, theme mode and flags to set, already checked. */
  set: Record<string, unknown>;
  /** Images to set. */
  images: Partial<Record<ImageKey, NewImage>>;
  reset: string[];
  creator: string;
}

/**
 * Changes branding settings of a context: the images' bytes go to `branding_assets` (content-addressed,
 * an image stored before is kept as it is) in the transaction of the `settings.changed` event, which
 * names each image by SHA-256 and type.
 */
export function changeBranding(eventStore: EventStore, change: BrandingChange): Promise<SettingsVersion> {
  const set = { ...change.set };
  const assets = Object.entries(change.images).map(([key, image]) => {
    const stored: StoredImage = { sha256: sha256Hex(image.content), content_type: image.contentType };
    set[key] = stored;
    return { ...stored, content: image.content };
  });
  return changeSettings(eventStore, {
    category: BRANDING,
    owner: change.owner,
    instanceId: change.instanceId,
    set,
    reset: change.reset,
    creator: change.creator,
    writeRows: async (tx) => {
      for (const asset of assets)
        await tx.query(
          `INSERT INTO branding_assets (instance_id, sha256, content_type, content) VALUES ($1, $2, $3, $4)
           ON CONFLICT (instance_id, sha256) DO NOTHING`,
          [change.instanceId, asset.sha256, asset.content_type, Buffer.from(asset.content)],
        );
    },
  });
}
