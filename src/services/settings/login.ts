import { create } from "@bufbuild/protobuf";
import { DurationSchema } from "@bufbuild/protobuf/wkt";
import { apiService } from "../../api/register.ts";
import { changeSettings } from "../../domain/settings/commands.ts";
import {
  LOGIN,
  LOGIN_FLAGS,
  LOGIN_LIFETIMES,
  LOGIN_LISTS,
  type LoginFlag,
  type LoginLifetime,
  type LoginList,
  lifetimeProblem,
  listProblem,
  loginDefaults,
} from "../../domain/settings/login.ts";
import { InvalidArgumentError } from "../../errors.ts";
import {
  PlatformLoginSettings,
  ResolvedLoginSettingsSchema,
  ResolveLoginSettingsResponseSchema,
  type SetLoginSettings,
  SetLoginSettingsResponseSchema,
} from "../../gen/platform/settings/login/v3alpha/login_service_pb.ts";
import {
  ResolvedBoolSchema,
  ResolvedDurationSchema,
  ResolvedStringsSchema,
  type SetBool,
  type SetDuration,
  type SetStrings,
} from "../../gen/platform/settings/object/v3alpha/object_pb.ts";
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

/** The API's field (lowerCamelCase in the generated message) of each stored name. */
const camel = (name: string) => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

type Given = SetLoginSettings & Record<string, unknown>;

/**
 * The changes a SetLoginSettings asks for, validated as a whole (a bad value stores nothing): flags as
 * booleans, factor lists without duplicates, lifetimes as whole seconds.
 */
function changesOf(settings: SetLoginSettings | undefined): {
  set: Record<string, unknown>;
  reset: string[];
} {
  const set: Record<string, unknown> = {};
  const reset: string[] = [];
  const given = (settings ?? {}) as Given;
  for (const name of LOGIN_FLAGS) {
    const value = (given[camel(name)] as SetBool | undefined)?.value;
    if (value?.case === "set") set[name] = value.value;
    else if (value?.case === "reset") reset.push(name);
  }
  for (const name of LOGIN_LISTS) {
    const value = (given[camel(name)] as SetStrings | undefined)?.value;
    if (value?.case === "reset") reset.push(name);
    else if (value?.case === "set") {
      const values = value.value.value;
      const problem = listProblem(name, values);
      if (problem) {
        throw new InvalidArgumentError(
          `"${problem.value}" is not a known type (known: ${(loginDefaults[name] as string[]).join(", ")})`,
          `settings.${name}.set.value[${problem.index}]`,
        );
      }
      set[name] = [...new Set(values)];
    }
  }
  for (const name of LOGIN_LIFETIMES) {
    const value = (given[camel(name)] as SetDuration | undefined)?.value;
    if (value?.case === "reset") reset.push(name);
    else if (value?.case === "set") {
      const { seconds, nanos } = value.value;
      const problem = nanos !== 0 ? "must be whole seconds" : lifetimeProblem(Number(seconds));
      if (problem) throw new InvalidArgumentError(problem, `settings.${name}.set`);
      set[name] = Number(seconds);
    }
  }
  return { set, reset };
}

/**
 * PlatformLoginSettings: the login policy (self-registration, the password reset link, unknown login
 * names, the ways to sign in, second factors and how long checks count), per system, instance or
 * organization, inherited system → instance → organization. The login UI and the sessions API read the
 * same values (src/login/login.ts `loginPolicy`).
 */
export function loginSettingsService(deps: ServiceDeps) {
  return apiService(PlatformLoginSettings, {
    async setLoginSettings(req, ctx) {
      const call = await authorize(deps, ctx, "settings.write", {
        ctx: req.ctx,
        features: ["multitenancy_settings"],
      });
      const { set, reset } = changesOf(req.settings);
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
      const resolved: Record<string, unknown> = {};
      for (const name of LOGIN_FLAGS as readonly LoginFlag[]) {
        const setting = resolveSetting<boolean>(layers, name, owner, loginDefaults[name]);
        resolved[camel(name)] = create(ResolvedBoolSchema, {
          value: setting.value,
          owner: setting.owner && toOwner(setting.owner),
        });
      }
      for (const name of LOGIN_LISTS as readonly LoginList[]) {
        const setting = resolveSetting<string[]>(layers, name, owner, loginDefaults[name]);
        resolved[camel(name)] = create(ResolvedStringsSchema, {
          value: setting.value,
          owner: setting.owner && toOwner(setting.owner),
        });
      }
      for (const name of LOGIN_LIFETIMES as readonly LoginLifetime[]) {
        const setting = resolveSetting<number>(layers, name, owner, loginDefaults[name]);
        resolved[camel(name)] = create(ResolvedDurationSchema, {
          value: create(DurationSchema, { seconds: BigInt(setting.value) }),
          owner: setting.owner && toOwner(setting.owner),
        });
      }
      return create(ResolveLoginSettingsResponseSchema, {
        details: settingsDetails(ownVersion(layers, owner), owner),
        settings: create(ResolvedLoginSettingsSchema, resolved),
      });
    },
  });
}
