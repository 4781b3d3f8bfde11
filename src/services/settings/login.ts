import { create } from "@bufbuild/protobuf";
import { apiService } from "../../api/register.ts";
import { changeSettings } from "../../domain/settings/commands.ts";
import { LOGIN, loginDefaults } from "../../domain/settings/login.ts";
import {
  PlatformLoginSettings,
  ResolvedLoginSettingsSchema,
  ResolveLoginSettingsResponseSchema,
  SetLoginSettingsResponseSchema,
} from "../../gen/platform/settings/login/v3alpha/login_service_pb.ts";
import { ResolvedBoolSchema } from "../../gen/platform/settings/object/v3alpha/object_pb.ts";
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

/**
 * PlatformLoginSettings: what the login UI offers (self-registration), per system, instance or
 * organization, inherited system → instance → organization. The login UI reads the same values
 * (src/login/settings.ts).
 */
export function loginSettingsService(deps: ServiceDeps) {
  return apiService(PlatformLoginSettings, {
    async setLoginSettings(req, ctx) {
      const call = await authorize(deps, ctx, "settings.write", {
        ctx: req.ctx,
        features: ["multitenancy_settings"],
      });
      const set: Record<string, unknown> = {};
      const reset: string[] = [];
      const allowRegister = req.settings?.allowRegister?.value;
      if (allowRegister?.case === "set") set.allow_register = allowRegister.value;
      else if (allowRegister?.case === "reset") reset.push("allow_register");
      const owner = ownerOf(call.context);
      const version = await changeSettings(deps.eventStore, {
        category: LOGIN,
        owner,
        instanceId: settingsInstanceId(call.context),
        set,
        reset,
        creator: call.creator,
      });
      return create(SetLoginSettingsResponseSchema, { details: settingsDetails(version, owner) });
    },

    async resolveLoginSettings(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", {
        ctx: req.ctx,
        features: ["multitenancy_settings"],
      });
      const owner = ownerOf(call.context);
      const layers = await settingsLayers(deps.db, LOGIN, call.context);
      const allowRegister = resolveSetting<boolean>(
        layers,
        "allow_register",
        owner,
        loginDefaults.allow_register,
      );
      return create(ResolveLoginSettingsResponseSchema, {
        details: settingsDetails(ownVersion(layers, owner), owner),
        settings: create(ResolvedLoginSettingsSchema, {
          allowRegister: create(ResolvedBoolSchema, {
            value: allowRegister.value,
            owner: allowRegister.owner && toOwner(allowRegister.owner),
          }),
        }),
      });
    },
  });
}
