import { create } from "@bufbuild/protobuf";
import { apiService } from "../../api/register.ts";
import { changeSettings } from "../../domain/settings/commands.ts";
import { defaultLanguage, LANGUAGE, supportedLanguages } from "../../domain/settings/languages.ts";
import { InvalidArgumentError } from "../../errors.ts";
import {
  type Language,
  LanguageSchema,
  ResolvedLanguageSettingsSchema,
  ResolvedLanguagesSchema,
} from "../../gen/platform/settings/language/v3alpha/language_pb.ts";
import {
  PlatformLanguageSettings,
  ResolveLanguagesResponseSchema,
  SetLanguagesResponseSchema,
} from "../../gen/platform/settings/language/v3alpha/language_service_pb.ts";
import { ResolvedStringSchema } from "../../gen/platform/settings/object/v3alpha/object_pb.ts";
import {
  ownerOf,
  ownVersion,
  resolveSetting,
  SYSTEM_OWNER,
  settingsInstanceId,
  settingsLayers,
} from "../../query/settings.ts";
import { authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { settingsDetails, toOwner } from "../mapping.ts";

const supported = new Set<string>(supportedLanguages);

function requireSupported(key: string, field: string): void {
  if (!supported.has(key)) {
    throw new InvalidArgumentError(
      `"${key}" is not a supported language (supported: ${supportedLanguages.join(", ")})`,
      field,
    );
  }
}

const languages = (keys: readonly string[]): Language[] => keys.map((key) => create(LanguageSchema, { key }));

/**
 * PlatformLanguageSettings: default and restricted languages per instance or organization, inherited
 * system → instance → organization; the supported languages are the system's, immutable.
 */
export function languageSettingsService(deps: ServiceDeps) {
  return apiService(PlatformLanguageSettings, {
    async setLanguages(req, ctx) {
      const call = await authorize(deps, ctx, "settings.write", {
        ctx: req.ctx,
        features: ["multitenancy_settings"],
      });
      const set: Record<string, unknown> = {};
      const reset: string[] = [];
      const { settings } = req;
      if (settings?.defaultLanguage) {
        const key = settings.defaultLanguage.key;
        if (key === "") reset.push("default_language");
        else {
          requireSupported(key, "settings.default_language.key");
          set.default_language = key;
        }
      }
      if (settings?.restrictedLanguages) {
        const keys = settings.restrictedLanguages.languages.map((l) => l.key);
        if (keys.length === 0) reset.push("restricted_languages");
        else {
          keys.forEach((key, i) => {
            const field = `settings.restricted_languages.languages[${i}].key`;
            if (key === "") throw new InvalidArgumentError("is required", field);
            requireSupported(key, field);
          });
          set.restricted_languages = keys;
        }
      }
      const owner = ownerOf(call.context);
      const version = await changeSettings(deps.eventStore, {
        category: LANGUAGE,
        owner,
        instanceId: settingsInstanceId(call.context),
        set,
        reset,
        creator: call.creator,
      });
      return create(SetLanguagesResponseSchema, { details: settingsDetails(version, owner) });
    },

    async resolveLanguages(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", {
        ctx: req.ctx,
        features: ["multitenancy_settings"],
      });
      const owner = ownerOf(call.context);
      const layers = await settingsLayers(deps.db, LANGUAGE, call.context);
      const defaultLang = resolveSetting<string>(layers, "default_language", owner, defaultLanguage);
      const restricted = resolveSetting<string[]>(layers, "restricted_languages", owner, [
        ...supportedLanguages,
      ]);
      return create(ResolveLanguagesResponseSchema, {
        details: settingsDetails(ownVersion(layers, owner), owner),
        settings: create(ResolvedLanguageSettingsSchema, {
          defaultLanguage: create(ResolvedStringSchema, {
            value: defaultLang.value,
            owner: defaultLang.owner && toOwner(defaultLang.owner),
          }),
          restrictedLanguages: create(ResolvedLanguagesSchema, {
            value: languages(restricted.value),
            owner: restricted.owner && toOwner(restricted.owner),
          }),
          supportedLanguages: create(ResolvedLanguagesSchema, {
            value: languages(supportedLanguages),
            owner: toOwner(SYSTEM_OWNER),
          }),
        }),
      });
    },
  });
}
