import { create } from "@bufbuild/protobuf";
import { apiService } from "../../api/register.ts";
import { changeSettings } from "../../domain/settings/commands.ts";
import { supportedLanguages } from "../../domain/settings/languages.ts";
import { textsCategory } from "../../domain/settings/texts.ts";
import { InvalidArgumentError } from "../../errors.ts";
import { ResolvedStringSchema } from "../../gen/platform/settings/object/v3alpha/object_pb.ts";
import {
  ListTextKeysResponseSchema,
  PlatformTextSettings,
  ResolvedTextsSchema,
  ResolveTextsResponseSchema,
  SetTextsResponseSchema,
  TextKeySchema,
} from "../../gen/platform/settings/text/v3alpha/text_service_pb.ts";
import {
  ownerOf,
  ownVersion,
  resolveSetting,
  settingsInstanceId,
  settingsLayers,
} from "../../query/settings.ts";
import { placeholderOf } from "../../texts/format.ts";
import { builtInText, TEXT_KEYS } from "../../texts/keys.ts";
import { textProblem } from "../../texts/overrides.ts";
import { authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { settingsDetails, toOwner } from "../mapping.ts";

const supported = new Set<string>(supportedLanguages);

function requireSupported(language: string): void {
  if (!supported.has(language)) {
    throw new InvalidArgumentError(
      `"${language}" is not a supported language (supported: ${supportedLanguages.join(", ")})`,
      "language",
    );
  }
}

/** The listing of `_keys`: the same for every caller, made once. */
const KEY_LIST = [...TEXT_KEYS.values()].map((info) =>
  create(TextKeySchema, {
    key: info.key,
    description: info.description,
    placeholders: info.placeholders.map(placeholderOf),
  }),
);

/**
 * PlatformTextSettings: the texts of the login UI and the messages per language, overridden per instance
 * or organization and inherited system → instance → organization, the built-in texts of the language
 * last (src/texts). Stored as settings category `texts.<language>`, one value per text key.
 */
export function textSettingsService(deps: ServiceDeps) {
  return apiService(PlatformTextSettings, {
    async listTextKeys(_req, ctx) {
      await authorize(deps, ctx, "authenticated", { features: ["multitenancy_settings"] });
      return create(ListTextKeysResponseSchema, { keys: KEY_LIST });
    },

    async setTexts(req, ctx) {
      const call = await authorize(deps, ctx, "settings.write", {
        ctx: req.ctx,
        features: ["multitenancy_settings"],
      });
      requireSupported(req.language);
      const set: Record<string, string> = {};
      const reset: string[] = [];
      // sorted: of several bad keys, the error names the same one every time
      for (const key of Object.keys(req.settings?.texts ?? {}).sort()) {
        const value = req.settings!.texts[key].value;
        const field = `settings.texts[${JSON.stringify(key)}]`;
        if (!TEXT_KEYS.has(key)) {
          throw new InvalidArgumentError(
            `unknown text key "${key}" (GET /settings/v3alpha/texts/_keys lists them)`,
            field,
          );
        }
        if (value.case === "set") {
          const problem = textProblem(key, value.value, req.language);
          if (problem) throw new InvalidArgumentError(problem, `${field}.set`);
          set[key] = value.value;
        } else if (value.case === "reset") reset.push(key);
      }
      const owner = ownerOf(call.context);
      const version = await changeSettings(deps.eventStore, {
        category: textsCategory(req.language),
        owner,
        instanceId: settingsInstanceId(call.context),
        set,
        reset,
        creator: call.creator,
      });
      return create(SetTextsResponseSchema, { details: settingsDetails(version, owner) });
    },

    async resolveTexts(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", {
        ctx: req.ctx,
        features: ["multitenancy_settings"],
      });
      requireSupported(req.language);
      const owner = ownerOf(call.context);
      const layers = await settingsLayers(deps.db, textsCategory(req.language), call.context);
      const texts: Record<string, ReturnType<typeof create<typeof ResolvedStringSchema>>> = {};
      for (const info of TEXT_KEYS.values()) {
        const resolved = resolveSetting<string>(layers, info.key, owner, builtInText(info, req.language));
        texts[info.key] = create(ResolvedStringSchema, {
          value: resolved.value,
          owner: resolved.owner && toOwner(resolved.owner),
        });
      }
      return create(ResolveTextsResponseSchema, {
        details: settingsDetails(ownVersion(layers, owner), owner),
        settings: create(ResolvedTextsSchema, { language: req.language, texts }),
      });
    },
  });
}
