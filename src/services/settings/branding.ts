import { create } from "@bufbuild/protobuf";
import { apiService } from "../../api/register.ts";
import {
  BRANDING,
  BRANDING_FLAGS,
  COLOR_KEYS,
  changeBranding,
  IMAGE_KEYS,
  type ImageKey,
  type ImageType,
  imageProblem,
  type NewImage,
  normalColor,
  type ThemeMode as StoredThemeMode,
} from "../../domain/settings/branding.ts";
import { InvalidArgumentError } from "../../errors.ts";
import {
  PlatformBrandingSettings,
  ResolveBrandingSettingsResponseSchema,
  ResolvedBrandingSettingsSchema,
  ResolvedThemeModeSchema,
  type SetBrandingSettings,
  SetBrandingSettingsResponseSchema,
  ThemeMode,
} from "../../gen/platform/settings/branding/v3alpha/branding_service_pb.ts";
import {
  ResolvedBoolSchema,
  ResolvedStringSchema,
} from "../../gen/platform/settings/object/v3alpha/object_pb.ts";
import { imagePath, resolveBranding } from "../../query/branding.ts";
import { ownerOf, ownVersion, settingsInstanceId, settingsLayers } from "../../query/settings.ts";
import { authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { settingsDetails, toOwner } from "../mapping.ts";

const toStoredMode: Partial<Record<ThemeMode, StoredThemeMode>> = {
  [ThemeMode.AUTO]: "auto",
  [ThemeMode.LIGHT]: "light",
  [ThemeMode.DARK]: "dark",
};
const fromStoredMode: Record<StoredThemeMode, ThemeMode> = {
  auto: ThemeMode.AUTO,
  light: ThemeMode.LIGHT,
  dark: ThemeMode.DARK,
};

const camel = (key: string) => key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/** What a SetBrandingSettings changes, every value checked: the first bad one names its field. */
function changeOf(settings: SetBrandingSettings | undefined) {
  const set: Record<string, unknown> = {};
  const images: Partial<Record<ImageKey, NewImage>> = {};
  const reset: string[] = [];
  if (!settings) return { set, images, reset };
  const given = settings as unknown as Record<
    string,
    { value: { case?: string; value?: unknown } } | undefined
  >;
  for (const key of COLOR_KEYS) {
    const value = given[camel(key)]?.value;
    if (value?.case === "reset") reset.push(key);
    else if (value?.case === "set") {
      const color = normalColor(String(value.value));
      if (!color) throw new InvalidArgumentError("must be a colour #rrggbb", `settings.${key}.set`);
      set[key] = color;
    }
  }
  const mode = settings.themeMode?.value;
  if (mode?.case === "reset") reset.push("theme_mode");
  else if (mode?.case === "set") {
    const stored = toStoredMode[mode.value];
    if (!stored)
      throw new InvalidArgumentError(
        "must be THEME_MODE_AUTO, THEME_MODE_LIGHT or THEME_MODE_DARK",
        "settings.theme_mode.set",
      );
    set.theme_mode = stored;
  }
  for (const key of BRANDING_FLAGS) {
    const value = given[camel(key)]?.value;
    if (value?.case === "reset") reset.push(key);
    else if (value?.case === "set") set[key] = value.value === true;
  }
  for (const key of IMAGE_KEYS) {
    const value = settings[camel(key) as "logo"]?.value;
    if (value?.case === "reset") reset.push(key);
    else if (value?.case === "set") {
      const problem = imageProblem(value.value.content, value.value.contentType);
      if (problem) throw new InvalidArgumentError(problem, `settings.${key}.set`);
      images[key] = { content: value.value.content, contentType: value.value.contentType as ImageType };
    }
  }
  return { set, images, reset };
}

/**
 * PlatformBrandingSettings: the login UI's and HTML messages' colours, theme and images per instance or
 * organization, inherited system → instance → organization (docs/branding.md). Images are stored by the
 * command in `branding_assets`; the resolved settings give their URLs.
 */
export function brandingSettingsService(deps: ServiceDeps) {
  return apiService(PlatformBrandingSettings, {
    async setBrandingSettings(req, ctx) {
      const call = await authorize(deps, ctx, "settings.write", {
        ctx: req.ctx,
        features: ["multitenancy_settings"],
      });
      if (call.context.type === "system")
        throw new InvalidArgumentError("branding is set in an instance or an organization", "ctx");
      const change = changeOf(req.settings);
      const owner = ownerOf(call.context);
      const version = await changeBranding(deps.eventStore, {
        owner,
        instanceId: settingsInstanceId(call.context),
        ...change,
        creator: call.creator,
      });
      return create(SetBrandingSettingsResponseSchema, { details: settingsDetails(version, owner) });
    },

    async resolveBrandingSettings(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", {
        ctx: req.ctx,
        features: ["multitenancy_settings"],
      });
      const owner = ownerOf(call.context);
      const layers = await settingsLayers(deps.db, BRANDING, call.context);
      const branding = resolveBranding(layers, owner);
      const instanceId = settingsInstanceId(call.context);
      const string = (value: string, from: typeof branding.themeMode.owner) =>
        create(ResolvedStringSchema, { value, owner: from && toOwner(from) });
      const bool = (resolved: { value: boolean; owner?: typeof branding.themeMode.owner }) =>
        create(ResolvedBoolSchema, {
          value: resolved.value,
          owner: resolved.owner && toOwner(resolved.owner),
        });
      const url = (key: ImageKey) => {
        const image = branding.images[key];
        return string(image.value ? imagePath(instanceId, image.value) : "", image.owner);
      };
      const color = (key: (typeof COLOR_KEYS)[number]) =>
        string(branding.colors[key].value, branding.colors[key].owner);
      return create(ResolveBrandingSettingsResponseSchema, {
        details: settingsDetails(ownVersion(layers, owner), owner),
        settings: create(ResolvedBrandingSettingsSchema, {
          primaryColor: color("primary_color"),
          backgroundColor: color("background_color"),
          warnColor: color("warn_color"),
          fontColor: color("font_color"),
          primaryColorDark: color("primary_color_dark"),
          backgroundColorDark: color("background_color_dark"),
          warnColorDark: color("warn_color_dark"),
          fontColorDark: color("font_color_dark"),
          themeMode: create(ResolvedThemeModeSchema, {
            value: fromStoredMode[branding.themeMode.value],
            owner: branding.themeMode.owner && toOwner(branding.themeMode.owner),
          }),
          hideLoginNameSuffix: bool(branding.flags.hide_login_name_suffix),
          disableWatermark: bool(branding.flags.disable_watermark),
          logoUrl: url("logo"),
          logoDarkUrl: url("logo_dark"),
          iconUrl: url("icon"),
          iconDarkUrl: url("icon_dark"),
        }),
      });
    },
  });
}
