import { create } from "@bufbuild/protobuf";
import { apiService } from "../../api/register.ts";
import { changeSettings } from "../../domain/settings/commands.ts";
import { LOGIN, LOGIN_FLAGS, loginDefaults } from "../../domain/settings/login.ts";
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
 * PlatformLoginSettings: what the login UI offers and reveals (self-registration, the password reset link,
 * unknown login names), per system, instance or organization, inherited system → instance → organization. The login UI reads the same values
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
      const given = {
        allow_register: req.settings?.allowRegister?.value,
        hide_password_reset: req.settings?.hidePasswordReset?.value,
        ignore_unknown_usernames: req.settings?.ignoreUnknownUsernames?.value,
      };
      for (const name of LOGIN_FLAGS) {
        const value = given[name];
        if (value?.case === "set") set[name] = value.value;
        else if (value?.case === "reset") reset.push(name);
      }
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
      const resolved = (name: (typeof LOGIN_FLAGS)[number]) => {
        const setting = resolveSetting<boolean>(layers, name, owner, loginDefaults[name]);
        return create(ResolvedBoolSchema, {
          value: setting.value,
          owner: setting.owner && toOwner(setting.owner),
        });
      };
      return create(ResolveLoginSettingsResponseSchema, {
        details: settingsDetails(ownVersion(layers, owner), owner),
        settings: create(ResolvedLoginSettingsSchema, {
          allowRegister: resolved("allow_register"),
          hidePasswordReset: resolved("hide_password_reset"),
          ignoreUnknownUsernames: resolved("ignore_unknown_usernames"),
        }),
      });
    },
  });
}
