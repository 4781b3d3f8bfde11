import { create, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import type { FieldMask } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import { type ApiService, apiService } from "../../api/register.ts";
import type { ResolvedContext } from "../../auth/caller.ts";
import { resolveContext } from "../../auth/context.ts";
import type { Permission } from "../../auth/permissions.ts";
import { seal, unseal } from "../../crypto/masterkey.ts";
import { addIdp, changeIdp, removeIdp, setIdpStatePolicy } from "../../domain/idp/commands.ts";
import {
  type AutoLinking,
  IDP,
  type IdpConfig,
  type IdpOptions,
  type IdpOwnerType,
  type IdpState,
  IdpType,
} from "../../domain/idp/events.ts";
import { FailedPreconditionError, InvalidArgumentError, NotFoundError } from "../../errors.ts";
import { ParentSchema, StatePolicy } from "../../gen/platform/object/v3alpha/object_pb.ts";
import {
  CodehostBConfigSchema,
  CodehostBSelfHostedConfigSchema,
  GetCodehostBIDPSchema,
  GetCodehostBSelfHostedIDPSchema,
  type GetIDP,
  GetIDPSchema,
  GetOAuthIDPSchema,
  GetOIDCIDPSchema,
  IDPFieldName,
  type IDP as IDPMessage,
  IDPSchema,
  type IDPSearchFilter,
  OAuthConfigSchema,
  OIDCConfigSchema,
  type Options,
  OptionsSchema,
  PatchCodehostBIDPSchema,
  PatchCodehostBSelfHostedIDPSchema,
  type PatchIDP,
  PatchOAuthIDPSchema,
  PatchOIDCIDPSchema,
  type PatchOptions,
} from "../../gen/platform/resources/idp/v3alpha/idp_pb.ts";
import { PlatformIdentityProviders } from "../../gen/platform/resources/idp/v3alpha/idp_service_pb.ts";
import { newId } from "../../id.ts";
import { IDP_COLUMNS, type IdpRow, idpInView, idpOwner, idpSecretContext } from "../../query/idps.ts";
import { type ReusableOwner, relation, reusableView, type Viewpoint } from "../../query/reusable.ts";
import { search, toPage, Where } from "../../query/search.ts";
import { type AuthorizedCall, authenticate, authorize, type Call, toSelector } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails, resourceDetails } from "../mapping.ts";
import { type PatchFields, patchFields } from "../patch.ts";

const FLAG = "multitenancy_resources_api" as const;
const INSTANCE_OWNER = 2;
const ORG_OWNER = 3;

// ---- input ----

function nonBlank(value: string, field: string): string {
  if (value.trim() === "") throw new InvalidArgumentError("must not be blank", field);
  return value.trim();
}

function httpUrl(url: string, field: string): string {
  let protocol = "";
  try {
    protocol = new URL(url).protocol;
  } catch {
    // reported below
  }
  if (protocol !== "http:" && protocol !== "https:")
    throw new InvalidArgumentError("must be an http or https URI", field);
  return url;
}

function optionsOf(o: Options | undefined): IdpOptions {
  return {
    is_manual_linking_allowed: o?.isManualLinkingAllowed === true,
    is_manual_creation_allowed: o?.isManualCreationAllowed === true,
    is_auto_creation: o?.isAutoCreation === true,
    is_auto_update: o?.isAutoUpdate === true,
    auto_linking: (o?.autoLinking ?? 0) as AutoLinking,
  };
}

/** The state in the owning context a policy chosen there means: ACTIVATE (also unspecified) or DEACTIVATE. */
function ownerState(policy: StatePolicy | undefined, field: string): IdpState {
  if (policy === StatePolicy.INHERIT)
    throw new InvalidArgumentError(
      "STATE_POLICY_INHERIT is only possible in a child context (the owning context has no parent)",
      field,
    );
  return policy === StatePolicy.DEACTIVATE ? 2 : 1;
}

/**
 * The state a patch in the owning context sets. Unlike a create (where an unspecified policy means
 * ACTIVATE), an explicit UNSPECIFIED in a patch names no policy: refused as in a child context, so it cannot
 * silently reactivate a provider that was switched off.
 */
function ownerPatchState(policy: StatePolicy, field: string): IdpState {
  if (policy === StatePolicy.UNSPECIFIED)
    throw new InvalidArgumentError("must be STATE_POLICY_ACTIVATE or STATE_POLICY_DEACTIVATE", field);
  return ownerState(policy, field);
}

/** Configuration of one provider type: how requests map to the stored configuration and back. */
interface TypeSpec {
  type: IdpType;
  /** Create: the configuration (validated) and the client secret. */
  fromCreate(config: Record<string, unknown>, prefix: string): { config: IdpConfig; secret: string };
  /** Patch: the members that change (`has`, patchFields' rule) and the new client secret, if any. */
  fromPatch(
    config: Record<string, unknown>,
    has: (member: string) => boolean,
    prefix: string,
  ): { config: Partial<IdpConfig>; secret?: string };
  /** Read: the configuration message (without the client secret). */
  toConfig(config: IdpConfig): unknown;
  configSchema: DescMessage;
  getSchema: DescMessage;
  /** The patch body's message (`Patch<Type>IDP`). */
  patchSchema: DescMessage;
}

type Input = Record<string, unknown> & { clientSecret?: string; clientId?: string; scopes?: string[] };

const str = (v: unknown) => (typeof v === "string" ? v : undefined);

const specs = {
  codehostB: {
    type: IdpType.codehostB,
    fromCreate: (c: Input, prefix: string) => ({
      config: { client_id: nonBlank(c.clientId!, `${prefix}.client_id`), scopes: c.scopes ?? [] },
      secret: c.clientSecret!,
    }),
    fromPatch: (c: Input, has: (member: string) => boolean, prefix: string) => ({
      config: {
        client_id: has("client_id") ? nonBlank(c.clientId ?? "", `${prefix}.client_id`) : undefined,
        scopes: has("scopes") ? (c.scopes ?? []) : undefined,
      },
      secret: has("client_secret") ? secretOf(c.clientSecret, `${prefix}.client_secret`) : undefined,
    }),
    toConfig: (c: IdpConfig) => ({ clientId: c.client_id, scopes: c.scopes }),
    configSchema: CodehostBConfigSchema,
    getSchema: GetCodehostBIDPSchema,
    patchSchema: PatchCodehostBIDPSchema,
  },
  codehostBSelfHosted: {
    type: IdpType.codehostBSelfHosted,
    fromCreate: (c: Input, prefix: string) => ({
      config: {
        issuer: httpUrl(str(c.issuer)!, `${prefix}.issuer`),
        client_id: nonBlank(c.clientId!, `${prefix}.client_id`),
        scopes: c.scopes ?? [],
      },
      secret: c.clientSecret!,
    }),
    fromPatch: (c: Input, has: (member: string) => boolean, prefix: string) => ({
      config: {
        issuer: has("issuer") ? httpUrl(str(c.issuer) ?? "", `${prefix}.issuer`) : undefined,
        client_id: has("client_id") ? nonBlank(c.clientId ?? "", `${prefix}.client_id`) : undefined,
        scopes: has("scopes") ? (c.scopes ?? []) : undefined,
      },
      secret: has("client_secret") ? secretOf(c.clientSecret, `${prefix}.client_secret`) : undefined,
    }),
    toConfig: (c: IdpConfig) => ({ issuer: c.issuer, clientId: c.client_id, scopes: c.scopes }),
    configSchema: CodehostBSelfHostedConfigSchema,
    getSchema: GetCodehostBSelfHostedIDPSchema,
    patchSchema: PatchCodehostBSelfHostedIDPSchema,
  },
  oidc: {
    type: IdpType.oidc,
    fromCreate: (c: Input, prefix: string) => ({
      config: {
        issuer: httpUrl(str(c.issuer)!, `${prefix}.issuer`),
        client_id: nonBlank(c.clientId!, `${prefix}.client_id`),
        scopes: c.scopes ?? [],
        is_id_token_mapping: c.isIdTokenMapping === true,
      },
      secret: c.clientSecret!,
    }),
    fromPatch: (c: Input, has: (member: string) => boolean, prefix: string) => ({
      config: {
        issuer: has("issuer") ? httpUrl(str(c.issuer) ?? "", `${prefix}.issuer`) : undefined,
        client_id: has("client_id") ? nonBlank(c.clientId ?? "", `${prefix}.client_id`) : undefined,
        scopes: has("scopes") ? (c.scopes ?? []) : undefined,
        is_id_token_mapping: has("is_id_token_mapping") ? c.isIdTokenMapping === true : undefined,
      },
      secret: has("client_secret") ? secretOf(c.clientSecret, `${prefix}.client_secret`) : undefined,
    }),
    toConfig: (c: IdpConfig) => ({
      issuer: c.issuer,
      clientId: c.client_id,
      scopes: c.scopes,
      isIdTokenMapping: c.is_id_token_mapping === true,
    }),
    configSchema: OIDCConfigSchema,
    getSchema: GetOIDCIDPSchema,
    patchSchema: PatchOIDCIDPSchema,
  },
  oauth: {
    type: IdpType.oauth,
    fromCreate: (c: Input, prefix: string) => ({
      config: {
        authorization_endpoint: httpUrl(str(c.authorizationEndpoint)!, `${prefix}.authorization_endpoint`),
        token_endpoint: httpUrl(str(c.tokenEndpoint)!, `${prefix}.token_endpoint`),
        user_endpoint: httpUrl(str(c.userEndpoint)!, `${prefix}.user_endpoint`),
        client_id: nonBlank(c.clientId!, `${prefix}.client_id`),
        scopes: c.scopes ?? [],
        id_attribute: nonBlank(str(c.idAttribute)!, `${prefix}.id_attribute`),
      },
      secret: c.clientSecret!,
    }),
    fromPatch: (c: Input, has: (member: string) => boolean, prefix: string) => ({
      config: {
        authorization_endpoint: has("authorization_endpoint")
          ? httpUrl(str(c.authorizationEndpoint) ?? "", `${prefix}.authorization_endpoint`)
          : undefined,
        token_endpoint: has("token_endpoint")
          ? httpUrl(str(c.tokenEndpoint) ?? "", `${prefix}.token_endpoint`)
          : undefined,
        user_endpoint: has("user_endpoint")
          ? httpUrl(str(c.userEndpoint) ?? "", `${prefix}.user_endpoint`)
          : undefined,
        client_id: has("client_id") ? nonBlank(c.clientId ?? "", `${prefix}.client_id`) : undefined,
        scopes: has("scopes") ? (c.scopes ?? []) : undefined,
        id_attribute: has("id_attribute")
          ? nonBlank(str(c.idAttribute) ?? "", `${prefix}.id_attribute`)
          : undefined,
      },
      secret: has("client_secret") ? secretOf(c.clientSecret, `${prefix}.client_secret`) : undefined,
    }),
    toConfig: (c: IdpConfig) => ({
      authorizationEndpoint: c.authorization_endpoint,
      tokenEndpoint: c.token_endpoint,
      userEndpoint: c.user_endpoint,
      clientId: c.client_id,
      scopes: c.scopes,
      idAttribute: c.id_attribute,
    }),
    configSchema: OAuthConfigSchema,
    getSchema: GetOAuthIDPSchema,
    patchSchema: PatchOAuthIDPSchema,
  },
} satisfies Record<string, TypeSpec>;

/** A new client secret given in a patch (also when named in `update_mask` but absent: then refused). */
function secretOf(secret: string | undefined, field: string): string {
  if (!secret) throw new InvalidArgumentError("must not be empty", field);
  return secret;
}

/** The options a patch changes (patchFields' rule); the others keep their values. */
function optionsPatchOf(o: PatchOptions | undefined, fields: PatchFields): Partial<IdpOptions> {
  const has = (name: string) => fields.has(`idp.options.${name}`);
  const patch: Partial<IdpOptions> = {};
  if (has("is_manual_linking_allowed")) patch.is_manual_linking_allowed = o?.isManualLinkingAllowed ?? false;
  if (has("is_manual_creation_allowed"))
    patch.is_manual_creation_allowed = o?.isManualCreationAllowed ?? false;
  if (has("is_auto_creation")) patch.is_auto_creation = o?.isAutoCreation ?? false;
  if (has("is_auto_update")) patch.is_auto_update = o?.isAutoUpdate ?? false;
  if (has("auto_linking")) patch.auto_linking = (o?.autoLinking ?? 0) as AutoLinking;
  return patch;
}

// ---- output ----

function ownerOf(row: { owner_type: number; owner_id: string }) {
  return { type: row.owner_type as ReusableOwner, id: row.owner_id };
}

function toIdpMessage(row: IdpRow): IDPMessage {
  const o = row.options;
  return create(IDPSchema, {
    name: row.name,
    statePolicy: row.state_policy,
    options: create(OptionsSchema, {
      isManualLinkingAllowed: o.is_manual_linking_allowed === true,
      isManualCreationAllowed: o.is_manual_creation_allowed === true,
      isAutoCreation: o.is_auto_creation === true,
      isAutoUpdate: o.is_auto_update === true,
      autoLinking: o.auto_linking ?? 0,
    }),
  });
}

/** The type-agnostic fields every Get* message shares. */
function viewFields(row: IdpRow) {
  return {
    details: resourceDetails({
      id: row.id,
      sequence: Number(row.sequence),
      changeDate: new Date(row.changed_at),
      owner: ownerOf(row),
    }),
    parent: row.is_child
      ? create(ParentSchema, {
          parent: { type: INSTANCE_OWNER, id: row.owner_id },
          state: row.parent_state ?? 0,
        })
      : undefined,
    state: row.effective_state,
    type: row.type,
  };
}

function toGetIdp(row: IdpRow): GetIDP {
  return create(GetIDPSchema, { ...viewFields(row), idp: toIdpMessage(row) });
}

function toTypedGet(spec: TypeSpec, row: IdpRow) {
  return create(spec.getSchema, {
    ...viewFields(row),
    idp: { idp: toIdpMessage(row), config: create(spec.configSchema, spec.toConfig(row.config) as never) },
  } as MessageInitShape<DescMessage>);
}

// ---- calls on one provider ----

interface IdpCall extends Call {
  instanceId: string;
  view: Viewpoint;
  relation: "owner" | "child";
  owner: { owner_type: number; owner_id: string };
}

/**
 * A call on provider `id`: authenticate (401), resolve `ctx` (404), the flag (400), the provider visible in
 * the viewing context (404; default view: the owning context), the permission there (403).
 */
async function idpCall(
  deps: ServiceDeps,
  ctx: HandlerContext,
  reqCtx: Parameters<typeof toSelector>[0],
  id: string,
  permission: Permission,
  type?: IdpType,
): Promise<IdpCall> {
  const call = await authenticate(deps, ctx);
  const selector = toSelector(reqCtx);
  const selected = await resolveContext(
    deps.db,
    deps.instances,
    call.caller,
    call.scope.instanceId,
    selector,
  );
  if (selected.type === "system")
    throw new InvalidArgumentError("identity providers live in an instance or an organization", "ctx");
  const instanceId = selected.instanceId;
  await deps.features.require(instanceId, FLAG);
  const owner = await idpOwner(deps.db, instanceId, id);
  if (!owner || (type !== undefined && owner.type !== type))
    throw new NotFoundError(`identity provider ${id} not found`);
  const view: Viewpoint = selector
    ? selected.type === "org"
      ? { instanceId, orgId: selected.orgId }
      : { instanceId }
    : owner.owner_type === ORG_OWNER
      ? { instanceId, orgId: owner.owner_id }
      : { instanceId };
  const rel = relation(owner, view);
  if (!rel) throw new NotFoundError(`identity provider ${id} not found`);
  const context: ResolvedContext = view.orgId
    ? { type: "org", instanceId, orgId: view.orgId }
    : { type: "instance", instanceId };
  await deps.authorizer.authorize(call.caller, permission, context);
  return { ...call, instanceId, view, relation: rel, owner };
}

/** The provider as the call's viewing context sees it. */
async function readInView(deps: ServiceDeps, c: IdpCall, id: string): Promise<IdpRow> {
  const row = await idpInView(deps.db, c.view, id);
  if (!row) throw new NotFoundError(`identity provider ${id} not found`);
  return row;
}

// ---- the service ----

type TypedRequest = {
  ctx?: Parameters<typeof toSelector>[0];
  idp?: { idp?: IDPMessage; config?: unknown };
};
type PatchRequest = {
  ctx?: Parameters<typeof toSelector>[0];
  id: string;
  idp?: { idp?: PatchIDP; config?: unknown };
  updateMask?: FieldMask;
};

function typedRpcs(deps: ServiceDeps, spec: TypeSpec) {
  return {
    async create(req: TypedRequest, ctx: HandlerContext) {
      const call: AuthorizedCall = await authorize(deps, ctx, "idp.write", {
        ctx: req.ctx as never,
        features: [FLAG],
      });
      if (call.context.type === "system")
        throw new InvalidArgumentError("identity providers live in an instance or an organization", "ctx");
      const instanceId = call.context.instanceId;
      const owner =
        call.context.type === "instance"
          ? { type: INSTANCE_OWNER as IdpOwnerType, id: instanceId }
          : { type: ORG_OWNER as IdpOwnerType, id: call.context.orgId };
      const input = req.idp!; // required by the declared rules, as are idp.idp and idp.config
      const { config, secret } = spec.fromCreate(input.config as Input, "idp.config");
      const id = newId();
      const version = await addIdp(
        deps.eventStore,
        { instanceId, creator: call.creator },
        id,
        {
          owner_type: owner.type,
          owner_id: owner.id,
          type: spec.type,
          name: nonBlank(input.idp!.name, "idp.idp.name"),
          state: ownerState(input.idp!.statePolicy, "idp.idp.state_policy"),
          options: optionsOf(input.idp!.options),
          config,
        },
        seal(deps.masterKey, secret, idpSecretContext(instanceId, id)),
      );
      return { details: resourceDetails({ ...version, owner }) };
    },

    async get(req: { ctx?: Parameters<typeof toSelector>[0]; id: string }, ctx: HandlerContext) {
      const c = await idpCall(deps, ctx, req.ctx, req.id, "idp.read", spec.type);
      return { idp: toTypedGet(spec, await readInView(deps, c, req.id)) };
    },

    async patch(req: PatchRequest, ctx: HandlerContext) {
      const fields = patchFields(spec.patchSchema, req.idp as never, req.updateMask, "idp");
      const c = await idpCall(deps, ctx, req.ctx, req.id, "idp.write", spec.type);
      const pushCtx = { instanceId: c.instanceId, creator: c.creator };
      const patch = req.idp;
      const owner = ownerOf(c.owner);
      const statePolicy = fields.has("idp.state_policy") ? (patch?.idp?.statePolicy ?? 0) : undefined;
      if (c.relation === "child") {
        if (fields.touches("idp.name") || fields.touches("idp.options") || fields.touches("config"))
          throw new FailedPreconditionError(
            "configuration is read-only in this context: only idp.idp.state_policy may be changed here",
          );
        const policy = statePolicy;
        if (policy === undefined) {
          const row = await readInView(deps, c, req.id);
          return {
            details: resourceDetails({
              id: req.id,
              sequence: Number(row.sequence),
              changeDate: new Date(row.changed_at),
              owner,
            }),
          };
        }
        if (policy === StatePolicy.UNSPECIFIED)
          throw new InvalidArgumentError(
            "must be STATE_POLICY_ACTIVATE, STATE_POLICY_DEACTIVATE or STATE_POLICY_INHERIT",
            "idp.idp.state_policy",
          );
        const version = await setIdpStatePolicy(
          deps.eventStore,
          pushCtx,
          req.id,
          spec.type,
          c.view.orgId!,
          policy as 1 | 2 | 3,
        );
        return { details: resourceDetails({ ...version, owner }) };
      }
      const config = fields.touches("config")
        ? spec.fromPatch(
            (patch?.config ?? {}) as Input,
            (member) => fields.has(`config.${member}`),
            "idp.config",
          )
        : { config: undefined, secret: undefined };
      const secret = config.secret;
      const secretContext = idpSecretContext(c.instanceId, req.id);
      const version = await changeIdp(deps.eventStore, pushCtx, req.id, spec.type, {
        name: fields.has("idp.name") ? nonBlank(patch?.idp?.name ?? "", "idp.idp.name") : undefined,
        state: statePolicy === undefined ? undefined : ownerPatchState(statePolicy, "idp.idp.state_policy"),
        options: fields.touches("idp.options") ? optionsPatchOf(patch?.idp?.options, fields) : undefined,
        config: config.config,
        clientSecret:
          secret === undefined
            ? undefined
            : {
                sealed: seal(deps.masterKey, secret, secretContext),
                isCurrent: (current) => {
                  try {
                    return unseal(deps.masterKey, current, secretContext) === secret;
                  } catch {
                    return false;
                  }
                },
              },
      });
      return { details: resourceDetails({ ...version, owner }) };
    },
  };
}

const sortColumns: Record<number, string> = {
  [IDPFieldName.IDP_FIELD_NAME_UNSPECIFIED]: "i.created_at",
  [IDPFieldName.IDP_FIELD_NAME_NAME]: "lower(i.name)",
};

function applyFilters(where: Where, filters: IDPSearchFilter[], effectiveState: string): void {
  for (const { filter } of filters) {
    switch (filter.case) {
      case "id": {
        const id = filter.value.id;
        where.and((p) => `i.id = ${p(id)}`);
        break;
      }
      case "name":
        where.text("i.name", filter.value.method, filter.value.name);
        break;
      case "state": {
        const state = filter.value.state;
        where.and((p) => `${effectiveState} = ${p(state)}`);
        break;
      }
    }
  }
}

/** PlatformIdentityProviders (docs/identity-providers.md). */
export function idpsService(deps: ServiceDeps): ApiService {
  const codehostB = typedRpcs(deps, specs.codehostB);
  const selfHosted = typedRpcs(deps, specs.codehostBSelfHosted);
  const oidc = typedRpcs(deps, specs.oidc);
  const oauth = typedRpcs(deps, specs.oauth);
  return apiService(PlatformIdentityProviders, {
    createCodehostBIDP: codehostB.create,
    patchCodehostBIDP: codehostB.patch,
    getCodehostBIDP: codehostB.get as never,
    createCodehostBSelfHostedIDP: selfHosted.create,
    patchCodehostBSelfHostedIDP: selfHosted.patch,
    getCodehostBSelfHostedIDP: selfHosted.get as never,
    createOIDCIDP: oidc.create,
    patchOIDCIDP: oidc.patch,
    getOIDCIDP: oidc.get as never,
    createOAuthIDP: oauth.create,
    patchOAuthIDP: oauth.patch,
    getOAuthIDP: oauth.get as never,

    async deleteIDP(req, ctx) {
      const c = await idpCall(deps, ctx, req.ctx, req.id, "idp.delete");
      if (c.relation === "child")
        throw new FailedPreconditionError(
          "an identity provider can only be deleted in the context that owns it (from here only its state policy can be set)",
        );
      const version = await removeIdp(
        deps.eventStore,
        { instanceId: c.instanceId, creator: c.creator },
        req.id,
      );
      return { details: resourceDetails({ ...version, owner: ownerOf(c.owner) }) };
    },

    async searchIDPs(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", { ctx: req.ctx, features: [FLAG] });
      if (call.context.type === "system")
        throw new InvalidArgumentError("identity providers live in an instance or an organization", "ctx");
      const instanceId = call.context.instanceId;
      const view: Viewpoint =
        call.context.type === "instance" ? { instanceId } : { instanceId, orgId: call.context.orgId };
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const where = new Where();
      const v = reusableView("i", IDP, view, (value) => where.param(value));
      where.and((p) => `i.instance_id = ${p(instanceId)}`).and(() => v.visible);
      // entries the caller may not read are dropped
      if (view.orgId) {
        const context: ResolvedContext = { type: "org", instanceId, orgId: view.orgId };
        if (!(await deps.authorizer.can(call.caller, "idp.read", context))) where.and(() => "FALSE");
      } else {
        const orgs = await deps.authorizer.orgsWith(call.caller, "idp.read", instanceId);
        if (orgs !== "all") {
          const ids = [...orgs];
          where.and((p) => `(i.owner_type = ${ORG_OWNER} AND i.owner_id = ANY(${p(ids)}))`);
        }
      }
      applyFilters(where, req.filters, v.effectiveState);
      const result = await search<IdpRow>(deps.db, {
        select: `${IDP_COLUMNS}, ${v.columns}`,
        from: `idps i ${v.join}`,
        where,
        orderBy: sortColumns[req.sortingColumn] ?? "i.created_at",
        tiebreak: "i.id",
        page,
        instanceId,
        aggregateTypes: [IDP],
      });
      return {
        details: listDetails(result),
        sortingColumn: req.sortingColumn,
        result: result.rows.map(toGetIdp),
      };
    },
  });
}
