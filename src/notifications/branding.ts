/**
 * The branding of a message (docs/branding.md "Messages"): the light colours and logo of the recipient's
 * organization, else the instance's (settings resolved system → instance → organization). The logo's URL
 * is absolute on the instance's origin, where the image is public (/assets/v3alpha/…). The text colour is
 * adjusted for contrast by the login's rule (src/login/branding-style.ts); the layout decides the rest
 * (./messages/layout.ts).
 */
import { BRANDING } from "../domain/settings/branding.ts";
import { OwnerType } from "../domain/settings/events.ts";
import { readableOn } from "../login/branding-style.ts";
import { imagePath, resolveBranding } from "../query/branding.ts";
import { settingsLayers } from "../query/settings.ts";
import type { Queryable } from "../storage/database.ts";
import type { Branding } from "./messages/index.ts";

/** How long a branding is kept at most; any settings event clears it sooner (`forget`). */
const TTL_MS = 5_000;
const MAX_ENTRIES = 10_000;

interface Found {
  colors: Omit<Branding, "logoUrl">;
  /** The logo's path on the instance's origin. */
  logoPath?: string;
}

export class MessageBrandings {
  private readonly cache = new Map<string, { value: Promise<Found>; until: number }>();

  constructor(private readonly db: Queryable) {}

  /** Settings changed (or changes may have been missed). */
  forget(): void {
    this.cache.clear();
  }

  /** The branding of a message to a user of `orgId` (undefined: the instance's), links on `origin`. */
  async of(instanceId: string, orgId: string | undefined, origin: string): Promise<Branding> {
    const key = `${instanceId}\u0000${orgId ?? ""}`;
    let entry = this.cache.get(key);
    if (!entry || entry.until < Date.now()) {
      if (this.cache.size >= MAX_ENTRIES) this.cache.clear();
      entry = { value: this.load(instanceId, orgId), until: Date.now() + TTL_MS };
      this.cache.set(key, entry);
      entry.value.catch(() => this.cache.delete(key));
    }
    const found = await entry.value;
    return { ...found.colors, logoUrl: found.logoPath && `${origin.replace(/\/$/, "")}${found.logoPath}` };
  }

  private async load(instanceId: string, orgId: string | undefined): Promise<Found> {
    const context = orgId
      ? { type: "org" as const, instanceId, orgId }
      : { type: "instance" as const, instanceId };
    const requested = orgId
      ? { type: OwnerType.org, id: orgId }
      : { type: OwnerType.instance, id: instanceId };
    const branding = resolveBranding(await settingsLayers(this.db, BRANDING, context), requested);
    const background = branding.colors.background_color.value;
    const logo = branding.images.logo.value;
    return {
      colors: {
        primaryColor: branding.colors.primary_color.value,
        backgroundColor: background,
        fontColor: readableOn(branding.colors.font_color.value, background),
      },
      logoPath: logo && imagePath(instanceId, logo),
    };
  }
}
