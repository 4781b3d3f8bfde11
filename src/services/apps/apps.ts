import { create } from "@bufbuild/protobuf";
import { type Duration, DurationSchema, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import { apiService } from "../../api/register.ts";
import type { Permission } from "../../auth/permissions.ts";
import { clientKeyPair, keyFile } from "../../crypto/keys.ts";
import { APP_COLUMNS, type AppRow, oidcConfigOf, readApp } from "../../domain/project/apps.ts";
import {
  addApp,
  addAppKey,
  changeApp,
  regenerateAppSecret,
  removeApp,
  removeAppKey,
} from "../../domain/project/commands.ts";
import { type ApiConfig, AppKind, type OidcConfig, PROJECT } from "../../domain/project/events.ts";
import { checkOidcConfig, normalizeOidcConfig, usesKeys } from "../../domain/project/oidc.ts";
import { FailedPreconditionError, InvalidArgumentError, NotFoundError } from "../../errors.ts";
import {
  APIConfigSchema,
  AppFieldName,
  type AppKey,
  AppKeySchema,
  AppSchema,
  type AppSearchFilter,
  type GetApp,
  GetAppSchema,
  type OIDCConfig,
  OIDCConfigSchema,
  PatchAppSchema,
  type PatchOIDCConfig,
  PlatformApps,
} from "../../gen/platform/resources/app/v3alpha/app_service_pb.ts";
import { newId } from "../../id.ts";
import { search, toPage, Where } from "../../query/search.ts";
import type { ServiceDeps } from "../deps.ts";
import { expiration, listDetails, resourceDetails } from "../mapping.ts";
import { nonBlank } from "../organizations/organizations.ts";
import { type PatchFields, patchFields } from "../patch.ts";
import { orgOwner, projectCall, toDate } from "../projects/access.ts";

const NANOS_PER_SECOND = 1_000_000_000;

/** A Duration in nanoseconds; NaN when negative or beyond a minute (the domain then rejects it). */
function durationNs(d: Duration | undefined): number {
  if (!d) return 0;
  if (d.seconds < 0n || d.nanos < 0 || d.seconds > 60n) return Number.NaN;
  return Number(d.seconds) * NANOS_PER_SECOND + d.nanos;
}

function durationOf(ns: number): Duration {
  return create(DurationSchema, {
    seconds: BigInt(Math.floor(ns / NANOS_PER_SECOND)),
    nanos: ns % NANOS_PER_SECOND,
  });
}

/** API OIDCConfig → the stored configuration, normalized and checked (INVALID_ARGUMENT under `field`). */
function oidcConfigFrom(c: OIDCConfig, field: string): OidcConfig {
  const config = normalizeOidcConfig({
    redirect_uris: c.redirectUris,
    post_logout_redirect_uris: c.postLogoutRedirectUris,
    response_types: c.responseTypes,
    grant_types: c.grantTypes,
    app_type: c.appType,
    auth_method: c.authMethod,
    access_token_type: c.accessTokenType,
    access_token_role_assertion: c.accessTokenRoleAssertion,
    id_token_role_assertion: c.idTokenRoleAssertion,
    id_token_userinfo_assertion: c.idTokenUserinfoAssertion,
    dev_mode: c.devMode,
    clock_skew_ns: durationNs(c.clockSkew),
  });
  checkOidcConfig(config, field);
  return config;
}

/**
 * The members of an OIDC configuration a patch changes (patchFields' rule): the value given, or the empty
 * value of a member named in `update_mask` but absent; undefined for the members that stay.
 */
function oidcPatchFrom(c: PatchOIDCConfig | undefined, fields: PatchFields): Partial<OidcConfig> {
  const has = (name: string) => fields.has(`oidc.${name}`);
  const patch: Partial<OidcConfig> = {};
  if (has("redirect_uris")) patch.redirect_uris = c?.redirectUris ?? [];
  if (has("post_logout_redirect_uris")) patch.post_logout_redirect_uris = c?.postLogoutRedirectUris ?? [];
  if (has("response_types")) patch.response_types = c?.responseTypes ?? [];
  if (has("grant_types")) patch.grant_types = c?.grantTypes ?? [];
  if (has("app_type")) patch.app_type = c?.appType ?? 0;
  if (has("auth_method")) patch.auth_method = c?.authMethod ?? 0;
  if (has("access_token_type")) patch.access_token_type = c?.accessTokenType ?? 0;
  if (has("access_token_role_assertion"))
    patch.access_token_role_assertion = c?.accessTokenRoleAssertion ?? false;
  if (has("id_token_role_assertion")) patch.id_token_role_assertion = c?.idTokenRoleAssertion ?? false;
  if (has("id_token_userinfo_assertion"))
    patch.id_token_userinfo_assertion = c?.idTokenUserinfoAssertion ?? false;
  if (has("dev_mode")) patch.dev_mode = c?.devMode ?? false;
  if (has("clock_skew")) patch.clock_skew_ns = durationNs(c?.clockSkew);
  return patch;
}

function toOidcConfig(c: OidcConfig): OIDCConfig {
  return create(OIDCConfigSchema, {
    redirectUris: c.redirect_uris,
    postLogoutRedirectUris: c.post_logout_redirect_uris,
    responseTypes: c.response_types,
    grantTypes: c.grant_types,
    appType: c.app_type,
    authMethod: c.auth_method,
    accessTokenType: c.access_token_type,
    accessTokenRoleAssertion: c.access_token_role_assertion,
    idTokenRoleAssertion: c.id_token_role_assertion,
    idTokenUserinfoAssertion: c.id_token_userinfo_assertion,
    devMode: c.dev_mode,
    clockSkew: durationOf(c.clock_skew_ns),
  });
}

function toGetApp(row: AppRow): GetApp {
  const app = create(AppSchema, { name: row.name });
  app.config =
    row.type === AppKind.oidc
      ? { case: "oidc", value: toOidcConfig(oidcConfigOf(row)) }
      : { case: "api", value: create(APIConfigSchema, { authMethod: Number(row.auth_method) }) };
  return create(GetAppSchema, {
    details: resourceDetails({
      id: row.id,
      sequence: Number(row.sequence),
      changeDate: toDate(row.changed_at),
      owner: orgOwner(row.org_id),
    }),
    projectId: row.project_id,
    app,
    clientId: row.client_id,
    hasClientSecret: row.client_secret_hash !== null,
  });
}

interface KeyRow {
  id: string;
  org_id: string;
  public_key: string;
  expires_at: Date | null;
  created_at: Date;
  sequence: number | string;
  [key: string]: unknown;
}

function toAppKey(row: KeyRow): AppKey {
  return create(AppKeySchema, {
    details: resourceDetails({
      id: row.id,
      sequence: Number(row.sequence),
      changeDate: toDate(row.created_at),
      owner: orgOwner(row.org_id),
    }),
    expirationDate: row.expires_at ? timestampFromDate(toDate(row.expires_at)) : undefined,
    publicKey: row.public_key,
  });
}

const sortColumns: Record<number, string> = {
  [AppFieldName.UNSPECIFIED]: "a.created_at",
  [AppFieldName.ID]: "a.id",
  [AppFieldName.CREATION_DATE]: "a.created_at",
  [AppFieldName.CHANGE_DATE]: "a.changed_at",
  [AppFieldName.NAME]: "lower(a.name)",
};

function applyFilters(where: Where, filters: AppSearchFilter[]): void {
  for (const { filter } of filters) {
    switch (filter.case) {
      case "name":
        where.text("a.name", filter.value.method, filter.value.name);
        break;
      case "inIds":
        where.in("a.id", filter.value.ids);
        break;
      case "clientId":
        where.and((p) => `a.client_id = ${p(filter.value.clientId)}`);
        break;
      case "type":
        // AppType numbers of the API are the stored kinds (1 OIDC, 2 API)
        where.and((p) => `a.type = ${p(filter.value.type)}`);
        break;
    }
  }
}

/**
 * PlatformApps: OIDC and API applications of projects (`/projects/{project_id}/apps`), their client secrets
 * and keys. Permissions project.app.* in the project; an app the caller may not read is 404.
 */
export function appsService(deps: ServiceDeps) {
  /** The app `appId` of the project with `permission` (404 `app not found` when unknown). */
  async function appCall(ctx: HandlerContext, projectId: string, appId: string, permission: Permission) {
    const call = await projectCall(deps, ctx, projectId, permission, "project.app.read");
    const app = await readApp(deps.db, call.instanceId, projectId, appId);
    if (!app) throw new NotFoundError("app not found");
    return { ...call, app };
  }

  const command = (call: { instanceId: string; creator: string }, projectId: string) => ({
    instanceId: call.instanceId,
    creator: call.creator,
    projectId,
  });

  return apiService(PlatformApps, {
    async createApp(req, ctx) {
      const call = await projectCall(deps, ctx, req.projectId, "project.app.write", "project.app.read");
      const input = req.app!;
      const name = nonBlank(input.name, "app.name");
      const config: { oidc: OidcConfig } | { api: ApiConfig } =
        input.config.case === "oidc"
          ? { oidc: oidcConfigFrom(input.config.value, "app.oidc") }
          : { api: { auth_method: input.config.value!.authMethod } };
      const { appId, clientId, clientSecret, version } = await addApp(deps.eventStore, {
        ...command(call, req.projectId),
        name,
        ...config,
      });
      return {
        details: resourceDetails({ id: appId, ...version, owner: orgOwner(call.project.org_id) }),
        clientId,
        clientSecret,
      };
    },

    async getApp(req, ctx) {
      const { app } = await appCall(ctx, req.projectId, req.id, "project.app.read");
      return { app: toGetApp(app) };
    },

    async patchApp(req, ctx) {
      const fields = patchFields(PatchAppSchema, req.app, req.updateMask, "app");
      const call = await appCall(ctx, req.projectId, req.id, "project.app.write");
      const input = req.app;
      const oidc = fields.touches("oidc");
      const api = fields.touches("api");
      if (oidc && api) throw new InvalidArgumentError("give either oidc or api, not both", "update_mask");
      const config = input?.config;
      const version = await changeApp(deps.eventStore, {
        ...command(call, req.projectId),
        appId: req.id,
        name: fields.has("name") ? nonBlank(input?.name ?? "", "app.name") : undefined,
        oidc: oidc ? oidcPatchFrom(config?.case === "oidc" ? config.value : undefined, fields) : undefined,
        api: api
          ? {
              auth_method: fields.has("api.auth_method")
                ? ((config?.case === "api" ? config.value.authMethod : undefined) ?? 0)
                : undefined,
            }
          : undefined,
      });
      return { details: resourceDetails({ id: req.id, ...version, owner: orgOwner(call.project.org_id) }) };
    },

    async deleteApp(req, ctx) {
      const call = await appCall(ctx, req.projectId, req.id, "project.app.delete");
      const version = await removeApp(deps.eventStore, { ...command(call, req.projectId), appId: req.id });
      return { details: resourceDetails({ id: req.id, ...version, owner: orgOwner(call.project.org_id) }) };
    },

    async searchApps(req, ctx) {
      const call = await projectCall(deps, ctx, req.projectId, "project.app.read", "project.app.read");
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const where = new Where()
        .and((p) => `a.instance_id = ${p(call.instanceId)}`)
        .and((p) => `a.project_id = ${p(req.projectId)}`);
      applyFilters(where, req.filters);
      const result = await search<AppRow>(deps.db, {
        select: APP_COLUMNS,
        from: "apps a",
        where,
        orderBy: sortColumns[req.sortingColumn] ?? "a.created_at",
        tiebreak: "a.id",
        page,
        instanceId: call.instanceId,
        aggregateTypes: [PROJECT],
      });
      return {
        details: listDetails(result),
        sortingColumn: req.sortingColumn,
        result: result.rows.map(toGetApp),
      };
    },

    async regenerateAppSecret(req, ctx) {
      const call = await appCall(ctx, req.projectId, req.id, "project.app.write");
      const { clientSecret, version } = await regenerateAppSecret(deps.eventStore, {
        ...command(call, req.projectId),
        appId: req.id,
      });
      return {
        details: resourceDetails({ id: req.id, ...version, owner: orgOwner(call.project.org_id) }),
        clientSecret,
      };
    },

    async createAppKey(req, ctx) {
      const call = await appCall(ctx, req.projectId, req.id, "project.app.write");
      // before the (slow) key generation; the command checks again on the current state
      if (!usesKeys(call.app.type, Number(call.app.auth_method)))
        throw new FailedPreconditionError(
          "keys exist only for apps with the authentication method private_key_jwt",
        );
      const expires = expiration(req.key?.expirationDate, "key.expiration_date");
      const keyId = newId();
      const { publicKey, privateKey } = await clientKeyPair(req.key?.publicKey, "key.public_key");
      const version = await addAppKey(deps.eventStore, {
        ...command(call, req.projectId),
        appId: req.id,
        keyId,
        publicKey,
        expiration: expires,
      });
      const keyContent = privateKey
        ? keyFile({
            type: "application",
            keyId,
            key: privateKey,
            appId: req.id,
            clientId: call.app.client_id,
          })
        : new Uint8Array();
      return {
        details: resourceDetails({ id: keyId, ...version, owner: orgOwner(call.project.org_id) }),
        keyId,
        keyContent,
      };
    },

    async listAppKeys(req, ctx) {
      const call = await appCall(ctx, req.projectId, req.id, "project.app.read");
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const where = new Where()
        .and((p) => `k.instance_id = ${p(call.instanceId)}`)
        .and((p) => `k.app_id = ${p(req.id)}`);
      const result = await search<KeyRow>(deps.db, {
        select: "k.id, a.org_id, k.public_key, k.expires_at, k.created_at, k.sequence",
        from: "app_keys k JOIN apps a ON a.instance_id = k.instance_id AND a.id = k.app_id",
        where,
        orderBy: "k.created_at",
        tiebreak: "k.id",
        page,
        instanceId: call.instanceId,
        aggregateTypes: [PROJECT],
      });
      return { details: listDetails(result), result: result.rows.map(toAppKey) };
    },

    async deleteAppKey(req, ctx) {
      const call = await appCall(ctx, req.projectId, req.id, "project.app.write");
      const version = await removeAppKey(deps.eventStore, {
        ...command(call, req.projectId),
        appId: req.id,
        keyId: req.keyId,
      });
      return {
        details: resourceDetails({ id: req.keyId, ...version, owner: orgOwner(call.project.org_id) }),
      };
    },
  });
}
