import { create } from "@bufbuild/protobuf";
import { apiService } from "../../api/register.ts";
import type { ResolvedContext } from "../../auth/caller.ts";
import { changeSettings } from "../../domain/settings/commands.ts";
import { FEATURES, featureDefaults, featureFlags } from "../../domain/settings/features.ts";
import { InvalidArgumentError } from "../../errors.ts";
import {
  GetFeaturesResponseSchema,
  PlatformFeatureSettings,
  ResolvedFeatureSettingsSchema,
  type SetFeatureSettings,
  SetFeaturesResponseSchema,
} from "../../gen/platform/settings/feature/v3alpha/feature_service_pb.ts";
import { ResolvedBoolSchema, type SetBool } from "../../gen/platform/settings/object/v3alpha/object_pb.ts";
import {
  ownerOf,
  ownVersion,
  resolveSetting,
  settingsInstanceId,
  settingsLayers,
} from "../../query/settings.ts";
import { authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { settingsDetails, toOwner } from "../mapping.ts";

/** Proto field (lowerCamelCase) of each flag. */
const fieldOf = {
  multitenancy_resources_api: "multitenancyResourcesApi",
  multitenancy_settings: "multitenancySettings",
  actions: "actions",
  token_exchange: "tokenExchange",
} as const;

function requireSystemOrInstance(context: ResolvedContext): void {
  if (context.type !== "system" && context.type !== "instance") {
    throw new InvalidArgumentError(
      "feature flags exist for the system and for instances, not for organizations",
      "ctx",
    );
  }
}

/**
 * PlatformFeatureSettings: flags in the system context (defaults for every instance; system users only)
 * and per instance (IAM_OWNER).
 */
export function featureSettingsService(deps: ServiceDeps) {
  return apiService(PlatformFeatureSettings, {
    async setFeatures(req, ctx) {
      const call = await authorize(deps, ctx, "feature.write", { ctx: req.ctx });
      requireSystemOrInstance(call.context);
      const set: Record<string, unknown> = {};
      const reset: string[] = [];
      for (const flag of featureFlags) {
        const value = req.settings?.[fieldOf[flag] as keyof SetFeatureSettings] as SetBool | undefined;
        if (value?.value.case === "set") set[flag] = value.value.value;
        else if (value?.value.case === "reset") reset.push(flag);
      }
      const owner = ownerOf(call.context);
      const version = await changeSettings(deps.eventStore, {
        category: FEATURES,
        owner,
        instanceId: settingsInstanceId(call.context),
        set,
        reset,
        creator: call.creator,
      });
      return create(SetFeaturesResponseSchema, { details: settingsDetails(version, owner) });
    },

    async getFeatures(req, ctx) {
      const call = await authorize(deps, ctx, "feature.read", { ctx: req.ctx });
      requireSystemOrInstance(call.context);
      const owner = ownerOf(call.context);
      const layers = await settingsLayers(deps.db, FEATURES, call.context);
      const settings = create(ResolvedFeatureSettingsSchema, {});
      for (const flag of featureFlags) {
        const resolved = resolveSetting<boolean>(layers, flag, owner, featureDefaults[flag]);
        (settings as unknown as Record<string, unknown>)[fieldOf[flag]] = create(ResolvedBoolSchema, {
          value: resolved.value,
          owner: resolved.owner && toOwner(resolved.owner),
        });
      }
      return create(GetFeaturesResponseSchema, {
        details: settingsDetails(ownVersion(layers, owner), owner),
        settings,
      });
    },
  });
}
