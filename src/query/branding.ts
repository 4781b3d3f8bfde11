/**
 * The effective branding of a context (docs/branding.md): every value resolved along system → instance →
 * organization with its owner, and where the images are served.
 */
import {
  BRANDING_FLAGS,
  type BrandingFlag,
  brandingColorDefaults,
  brandingFlagDefaults,
  COLOR_KEYS,
  type ColorKey,
  IMAGE_EXTENSIONS,
  IMAGE_KEYS,
  type ImageKey,
  type StoredImage,
  type ThemeMode,
  themeModeDefault,
} from "../domain/settings/branding.ts";
import type { SettingsOwner } from "../domain/settings/events.ts";
import type { Queryable } from "../storage/database.ts";
import { type Resolved, resolveSetting, type SettingsLayer } from "./settings.ts";

export interface ResolvedBranding {
  colors: Record<ColorKey, Resolved<string>>;
  themeMode: Resolved<ThemeMode>;
  flags: Record<BrandingFlag, Resolved<boolean>>;
  /** Undefined values: no context sets the image. */
  images: Record<ImageKey, Resolved<StoredImage | undefined>>;
}

export function resolveBranding(layers: SettingsLayer[], requested: SettingsOwner): ResolvedBranding {
  const each = <K extends string, T>(keys: readonly K[], fallback: (key: K) => T) =>
    Object.fromEntries(
      keys.map((key) => [key, resolveSetting<T>(layers, key, requested, fallback(key))]),
    ) as Record<K, Resolved<T>>;
  return {
    colors: each(COLOR_KEYS, (key) => brandingColorDefaults[key]),
    themeMode: resolveSetting<ThemeMode>(layers, "theme_mode", requested, themeModeDefault),
    flags: each(BRANDING_FLAGS, (key) => brandingFlagDefaults[key]),
    images: each<ImageKey, StoredImage | undefined>(IMAGE_KEYS, () => undefined),
  };
}

/** Whether any context along the chain sets a branding value (else the login looks as it does unbranded). */
export const isBranded = (layers: SettingsLayer[]) => layers.some((l) => Object.keys(l.values).length > 0);

/** The path of an instance's assets. */
export const assetsPrefix = (instanceId: string) =>
  `/assets/v3alpha/instances/${encodeURIComponent(instanceId)}`;

/** Where an image is served: the instance's, named by its SHA-256 (so it is cacheable forever). */
export function imagePath(instanceId: string, image: StoredImage): string {
  return `${assetsPrefix(instanceId)}/images/${image.sha256}.${IMAGE_EXTENSIONS[image.content_type]}`;
}

export interface BrandingAsset {
  contentType: string;
  content: Buffer;
}

/** An image of the instance by its SHA-256 (lower-case hexadecimal). */
export async function findBrandingAsset(
  db: Queryable,
  instanceId: string,
  sha256: string,
): Promise<BrandingAsset | undefined> {
  const rows = await db.query<{ content_type: string; content: Buffer | Uint8Array }>(
    "SELECT content_type, content FROM branding_assets WHERE instance_id = $1 AND sha256 = $2",
    [instanceId, sha256],
  );
  const row = rows[0];
  return row && { contentType: row.content_type, content: Buffer.from(row.content) };
}
