/**
 * Reads of identity providers: as an API context sees them (src/services/idps) and as the login UI needs
 * them (`activeIdpsForOrg`, `activeIdpForOrg`: the providers active in an organization, with their client
 * secrets decrypted). The effective state is computed in SQL by src/query/reusable.ts.
 */
import { unseal } from "../crypto/masterkey.ts";
import { AutoLinking, IDP, type IdpConfig, type IdpOptions, IdpType } from "../domain/idp/events.ts";
import type { Queryable } from "../storage/database.ts";
import {
  EffectiveState,
  type ReusableColumns,
  ReusableOwner,
  reusableView,
  type Viewpoint,
} from "./reusable.ts";
import { Where } from "./search.ts";

/** Columns of `idps` every read selects (alias `i`). */
export const IDP_COLUMNS =
  "i.id, i.owner_type, i.owner_id, i.state, i.type, i.name, i.options, i.config, i.created_at, i.changed_at, i.sequence";

/** A row of `idps` with what the viewing context sees of it. */
export interface IdpRow extends ReusableColumns {
  [key: string]: unknown;
  id: string;
  owner_type: number;
  owner_id: string;
  state: number;
  type: number;
  name: string;
  options: IdpOptions;
  config: IdpConfig;
  created_at: Date;
  changed_at: Date;
  sequence: number | string;
}

/** The master key's authenticated context of a provider's sealed client secret. */
export function idpSecretContext(instanceId: string, idpId: string): string {
  return `idp-client-secret:${instanceId}:${idpId}`;
}

/** The provider `id` of the instance with its owner (no view), or undefined. */
export async function idpOwner(
  db: Queryable,
  instanceId: string,
  id: string,
): Promise<{ owner_type: number; owner_id: string; type: number } | undefined> {
  const rows = await db.query<{ owner_type: number; owner_id: string; type: number }>(
    "SELECT owner_type, owner_id, type FROM idps WHERE instance_id = $1 AND id = $2",
    [instanceId, id],
  );
  return rows[0];
}

/**
 * Providers as `view` sees them (visible there only), with extra conditions added by `filter`.
 * One query; `extra` adds further SQL (ORDER BY ...).
 */
export async function idpsInView(
  db: Queryable,
  view: Viewpoint,
  filter: (where: Where, state: string) => void = () => {},
  extra = "ORDER BY i.name, i.id",
): Promise<IdpRow[]> {
  const where = new Where();
  const v = reusableView("i", IDP, view, (value) => where.param(value));
  where.and((p) => `i.instance_id = ${p(view.instanceId)}`).and(() => v.visible);
  filter(where, v.effectiveState);
  return db.query<IdpRow>(
    `SELECT ${IDP_COLUMNS}, ${v.columns} FROM idps i ${v.join} WHERE ${where} ${extra}`,
    where.params,
  );
}

/** One provider as `view` sees it; undefined when it does not exist or is not visible there. */
export async function idpInView(db: Queryable, view: Viewpoint, id: string): Promise<IdpRow | undefined> {
  const rows = await idpsInView(db, view, (where) => where.and((p) => `i.id = ${p(id)}`), "");
  return rows[0];
}

/** A provider as the login UI uses it. */
export interface LoginIdp {
  id: string;
  name: string;
  /** The context that configures it: the instance, or an organization (src/net/outbound.ts levels). */
  owner: "instance" | "organization";
  type: "oidc" | "oauth" | "codehost_b" | "codehost_b_self_hosted";
  options: {
    isManualLinkingAllowed: boolean;
    isManualCreationAllowed: boolean;
    isAutoCreation: boolean;
    isAutoUpdate: boolean;
    autoLinking: "unspecified" | "username" | "email";
  };
  config: {
    /** oidc, codehost_b_self_hosted (codehost_b: undefined; the login uses its fixed or configured issuer). */
    issuer?: string;
    /** oauth. */
    authorizationEndpoint?: string;
    tokenEndpoint?: string;
    userEndpoint?: string;
    idAttribute?: string;
    clientId: string;
    /** Decrypted. */
    clientSecret: string;
    scopes: string[];
    /** oidc. */
    isIdTokenMapping?: boolean;
  };
}

const typeNames: Record<number, LoginIdp["type"]> = {
  [IdpType.oidc]: "oidc",
  [IdpType.oauth]: "oauth",
  [IdpType.codehostB]: "codehost_b",
  [IdpType.codehostBSelfHosted]: "codehost_b_self_hosted",
};

const autoLinkingNames: Record<number, LoginIdp["options"]["autoLinking"]> = {
  [AutoLinking.unspecified]: "unspecified",
  [AutoLinking.username]: "username",
  [AutoLinking.email]: "email",
};

type LoginRow = IdpRow & { client_secret: string | null };

function toLoginIdp(masterKey: Buffer, instanceId: string, row: LoginRow): LoginIdp {
  const o = row.options;
  const c = row.config;
  const config: LoginIdp["config"] = {
    clientId: c.client_id,
    clientSecret: row.client_secret
      ? unseal(masterKey, row.client_secret, idpSecretContext(instanceId, row.id))
      : "",
    scopes: c.scopes ?? [],
  };
  if (c.issuer !== undefined) config.issuer = c.issuer;
  if (c.authorization_endpoint !== undefined) config.authorizationEndpoint = c.authorization_endpoint;
  if (c.token_endpoint !== undefined) config.tokenEndpoint = c.token_endpoint;
  if (c.user_endpoint !== undefined) config.userEndpoint = c.user_endpoint;
  if (c.id_attribute !== undefined) config.idAttribute = c.id_attribute;
  if (c.is_id_token_mapping !== undefined) config.isIdTokenMapping = c.is_id_token_mapping;
  return {
    id: row.id,
    name: row.name,
    owner: row.owner_type === ReusableOwner.org ? "organization" : "instance",
    type: typeNames[row.type],
    options: {
      isManualLinkingAllowed: o.is_manual_linking_allowed === true,
      isManualCreationAllowed: o.is_manual_creation_allowed === true,
      isAutoCreation: o.is_auto_creation === true,
      isAutoUpdate: o.is_auto_update === true,
      autoLinking: autoLinkingNames[o.auto_linking] ?? "unspecified",
    },
    config,
  };
}

async function activeInOrg(
  db: Queryable,
  masterKey: Buffer,
  instanceId: string,
  orgId: string,
  idpId?: string,
): Promise<LoginIdp[]> {
  const where = new Where();
  const v = reusableView("i", IDP, { instanceId, orgId }, (value) => where.param(value));
  where
    .and((p) => `i.instance_id = ${p(instanceId)}`)
    .and(() => v.visible)
    .and(() => `${v.effectiveState} = ${EffectiveState.active}`)
    .and((p) => `i.type = ANY(${p(Object.keys(typeNames).map(Number))})`);
  if (idpId !== undefined) where.and((p) => `i.id = ${p(idpId)}`);
  const rows = await db.query<LoginRow>(
    `SELECT ${IDP_COLUMNS}, ${v.columns}, s.client_secret FROM idps i ${v.join}
     LEFT JOIN idp_client_secrets s ON s.instance_id = i.instance_id AND s.idp_id = i.id
     WHERE ${where} ORDER BY i.name, i.id`,
    where.params,
  );
  return rows.map((row) => toLoginIdp(masterKey, instanceId, row));
}

/** Providers whose effective state in the organization is ACTIVE (the instance's and the org's own), by name. */
export function activeIdpsForOrg(
  db: Queryable,
  masterKey: Buffer,
  instanceId: string,
  orgId: string,
): Promise<LoginIdp[]> {
  return activeInOrg(db, masterKey, instanceId, orgId);
}

/** One provider if it exists in the instance, is visible to the org (instance-owned or owned by that org) and is ACTIVE there; else null. */
export async function activeIdpForOrg(
  db: Queryable,
  masterKey: Buffer,
  instanceId: string,
  orgId: string,
  idpId: string,
): Promise<LoginIdp | null> {
  const [idp] = await activeInOrg(db, masterKey, instanceId, orgId, idpId);
  return idp ?? null;
}
