/**
 * The branding of the login pages (docs/branding.md "Login UI"): resolved per organization from the
 * settings (system → instance → organization) once per change, kept in the login's settings cache
 * (./settings-cache.ts, cleared by settings events), with its stylesheet (./branding-style.ts) and the
 * URLs of its images. The branding of a page is that of the sign-in's organization: the auth request's
 * (`urn:platform:iam:org:id:<id>`), else the user's once the page knows it (a chosen session), else the
 * instance's.
 */
import { createHash } from "node:crypto";
import {
  BRANDING,
  brandingColorDefaults,
  COLOR_KEYS,
  type ColorKey,
  type StoredImage,
  type ThemeMode,
} from "../domain/settings/branding.ts";
import { OwnerType } from "../domain/settings/events.ts";
import { assetsPrefix, imagePath, isBranded, resolveBranding } from "../query/branding.ts";
import type { SettingsLayer } from "../query/settings.ts";
import { brandingStylesheet } from "./branding-style.ts";
import type { SettingsLayerCache } from "./settings-cache.ts";

/** An image for the light and the dark scheme (`dark` only when it differs). */
export interface SchemeImage {
  light: string;
  dark?: string;
}

/** What a page shows of its branding. */
export interface PageBranding {
  /** The branding stylesheet (linked after login.css), when the branding changes colours or the scheme. */
  stylesheet?: { url: string; body: string; hash: string };
  logo?: SchemeImage;
  icon?: SchemeImage;
  /** "Secured by …" stays hidden. */
  hideWatermark: boolean;
  /** Login names are shown without `@domain`. */
  hideLoginNameSuffix: boolean;
}

export const UNBRANDED: PageBranding = { hideWatermark: false, hideLoginNameSuffix: false };

/** The stylesheet's path segment of a context: the organization's ID, or `-` for the instance's own. */
const scopeSegment = (orgId: string | undefined) => (orgId ? encodeURIComponent(orgId) : "-");

/** Where the stylesheet of a context's branding is served, named by its content hash. */
export const stylesheetPath = (instanceId: string, orgId: string | undefined, hash: string) =>
  `${assetsPrefix(instanceId)}/branding/${scopeSegment(orgId)}/${hash}.css`;

/**
 * The light and dark variant of an image as the theme mode shows them: a forced scheme shows its own
 * variant (else the other one), `auto` both (each falling back to the other).
 */
function schemeImage(
  instanceId: string,
  light: StoredImage | undefined,
  dark: StoredImage | undefined,
  mode: ThemeMode,
): SchemeImage | undefined {
  const url = (image: StoredImage | undefined) => image && imagePath(instanceId, image);
  const [lightUrl, darkUrl] = [url(light), url(dark)];
  if (mode === "light") return lightUrl || darkUrl ? { light: (lightUrl ?? darkUrl)! } : undefined;
  if (mode === "dark") return lightUrl || darkUrl ? { light: (darkUrl ?? lightUrl)! } : undefined;
  if (!lightUrl && !darkUrl) return undefined;
  const shown = (lightUrl ?? darkUrl)!;
  return { light: shown, dark: darkUrl && darkUrl !== shown ? darkUrl : undefined };
}

/** A context's page branding from its settings layers. */
export function pageBranding(
  instanceId: string,
  orgId: string | undefined,
  layers: SettingsLayer[],
): PageBranding {
  if (!isBranded(layers)) return UNBRANDED;
  const requested = orgId ? { type: OwnerType.org, id: orgId } : { type: OwnerType.instance, id: instanceId };
  const branding = resolveBranding(layers, requested);
  const colors = Object.fromEntries(COLOR_KEYS.map((key) => [key, branding.colors[key].value])) as Record<
    ColorKey,
    string
  >;
  const customized = new Set(COLOR_KEYS.filter((key) => colors[key] !== brandingColorDefaults[key]));
  const mode = branding.themeMode.value;
  const body = brandingStylesheet({ colors, customized, themeMode: mode });
  const hash = body && createHash("sha256").update(body).digest("hex").slice(0, 16);
  const images = branding.images;
  return {
    stylesheet: body && hash ? { body, hash, url: stylesheetPath(instanceId, orgId, hash) } : undefined,
    logo: schemeImage(instanceId, images.logo.value, images.logo_dark.value, mode),
    icon: schemeImage(instanceId, images.icon.value, images.icon_dark.value, mode),
    hideWatermark: branding.flags.disable_watermark.value,
    hideLoginNameSuffix: branding.flags.hide_login_name_suffix.value,
  };
}

/** The page branding of an organization (or the instance), from the settings cache. */
export function brandingOf(
  settings: SettingsLayerCache,
  instanceId: string,
  orgId: string | undefined,
): Promise<PageBranding> {
  const context = orgId
    ? { type: "org" as const, instanceId, orgId }
    : { type: "instance" as const, instanceId };
  return settings.derived(BRANDING, context, (layers) => pageBranding(instanceId, orgId, layers));
}
