import { randomToken, sha256 } from "../../crypto/tokens.ts";
import {
  AlreadyExistsError,
  FailedPreconditionError,
  InvalidArgumentError,
  NotFoundError,
} from "../../errors.ts";
import type { EventStore } from "../../eventstore/eventstore.ts";
import type { CommandTx, NewEvent, StoredEvent } from "../../eventstore/types.ts";
import { newId } from "../../id.ts";
import type { Queryable } from "../../storage/database.ts";
import { addMembershipEvent, removeMembershipEvent } from "../membership/commands.ts";
import { ContextType } from "../membership/events.ts";
import { type Version, versionAfter } from "../org/commands.ts";
import { holdOrg, holdUser } from "../org/locks.ts";
import { cascadeNarrowUserGrants, cascadeRemoveUserGrant, userGrantsWhere } from "../usergrant/commands.ts";
import { type AppRow, configOf, newClientId, readApp } from "./apps.ts";
import {
  type ApiConfig,
  AppKind,
  type OidcConfig,
  PROJECT,
  type PrivateLabelingSetting,
  type ProjectChangedPayload,
  ProjectEvent,
  ProjectGrantState,
  type RoleAddedPayload,
  type RoleChangedPayload,
} from "./events.ts";
import { holdProject, type ProjectRow } from "./locks.ts";
import { checkOidcConfig, normalizeOidcConfig, sameConfig, usesKeys, usesSecret } from "./oidc.ts";

interface Command {
  instanceId: string;
  creator: string;
}

/** An event of the project aggregate (resource owner: the project's organization). */
function projectEvent(project: { id: string; org_id: string }, type: string, payload: object): NewEvent {
  return {
    aggregateType: PROJECT,
    aggregateId: project.id,
    resourceOwner: project.org_id,
    type,
    payload: { ...payload },
  };
}

const versionOf = (row: { sequence: number | string; changed_at: Date | string }): Version => ({
  sequence: Number(row.sequence),
  changeDate: row.changed_at instanceof Date ? row.changed_at : new Date(row.changed_at),
});

/**
 * Runs a command on the project `projectId`: its read-model row locked FOR UPDATE (see locks.ts) and its
 * sequence expected (optimistic lock) before `decide` reads the read model. Answers the project's version
 * after the events, or `current()` when `decide` appended none.
 */
async function onProject(
  eventStore: EventStore,
  cmd: Command & { projectId: string },
  decide: (project: ProjectRow, tx: CommandTx) => Promise<NewEvent[]>,
  current: (project: ProjectRow) => Version = versionOf,
): Promise<{ version: Version; stored: StoredEvent[] }> {
  let unchanged: Version = { sequence: 0 };
  const stored = await eventStore.push(cmd, async (tx) => {
    const project = await holdProject(tx, cmd.instanceId, cmd.projectId, "UPDATE");
    await tx.expect(PROJECT, cmd.projectId);
    const events = await decide(project, tx);
    if (events.length === 0) unchanged = current(project);
    return events;
  });
  return {
    version: stored.length ? versionAfter(stored, PROJECT, cmd.projectId) : unchanged,
    stored,
  };
}

// ---------------------------------------------------------------------------------------------- projects

/**
 * Creates a project in an organization. `ownerUserId`: the creator becomes the project's PROJECT_OWNER (a
 * membership in the project, in the same push), for callers who could not otherwise manage it.
 */
export async function createProject(
  eventStore: EventStore,
  cmd: Command & {
    orgId: string;
    name: string;
    roleAssertion: boolean;
    roleCheck: boolean;
    /** Absent or UNSPECIFIED: not written into the event (the default). */
    privateLabelingSetting?: PrivateLabelingSetting;
    ownerUserId?: string;
  },
): Promise<{ projectId: string; version: Version }> {
  const projectId = newId();
  const stored = await eventStore.push(cmd, async (tx) => {
    await holdOrg(tx, cmd.instanceId, cmd.orgId);
    const events: NewEvent[] = [
      projectEvent({ id: projectId, org_id: cmd.orgId }, ProjectEvent.added, {
        name: cmd.name,
        project_role_assertion: cmd.roleAssertion,
        project_role_check: cmd.roleCheck,
        ...(cmd.privateLabelingSetting ? { private_labeling_setting: cmd.privateLabelingSetting } : {}),
      }),
    ];
    if (cmd.ownerUserId) {
      await holdUser(tx, cmd.instanceId, cmd.ownerUserId);
      events.push(
        addMembershipEvent(newId(), cmd.orgId, {
          context_type: ContextType.project,
          context_id: projectId,
          user_id: cmd.ownerUserId,
          roles: ["PROJECT_OWNER"],
        }),
      );
    }
    return events;
  });
  return { projectId, version: versionAfter(stored, PROJECT, projectId) };
}

/** Changes the fields given that differ; none: no event. */
export async function changeProject(
  eventStore: EventStore,
  cmd: Command & { projectId: string; change: ProjectChangedPayload },
): Promise<Version> {
  const { version } = await onProject(eventStore, cmd, async (project) => {
    const current: Required<ProjectChangedPayload> = {
      name: project.name,
      project_role_assertion: project.role_assertion,
      project_role_check: project.role_check,
      private_labeling_setting: project.private_labeling_setting as PrivateLabelingSetting,
    };
    const changed: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(cmd.change)) {
      if (value !== undefined && current[key as keyof ProjectChangedPayload] !== value) changed[key] = value;
    }
    return Object.keys(changed).length ? [projectEvent(project, ProjectEvent.changed, changed)] : [];
  });
  return version;
}

/** The instance's management project (audience `platform`), or undefined. */
export async function managementProjectOf(db: Queryable, instanceId: string): Promise<string | undefined> {
  const rows = await db.query<{ iam_project_id: string | null }>(
    "SELECT iam_project_id FROM instances WHERE id = $1",
    [instanceId],
  );
  return rows[0]?.iam_project_id ?? undefined;
}

/**
 * Removes a project with, in the same push, its project memberships and its user grants (direct and
 * through project grants: `user_grant.cascade.removed`). Its roles, apps (with their keys) and project
 * grants end with the `project.removed` event. The management project stays.
 */
export async function removeProject(
  eventStore: EventStore,
  cmd: Command & { projectId: string },
): Promise<Version> {
  const { version } = await onProject(eventStore, cmd, async (project, tx) => {
    if ((await managementProjectOf(tx, cmd.instanceId)) === project.id)
      throw new FailedPreconditionError("the instance's management project cannot be deleted");
    const memberships = await tx.query<{ id: string; user_id: string }>(
      "SELECT id, user_id FROM memberships WHERE instance_id = $1 AND context_type = $2 AND context_id = $3 ORDER BY id",
      [cmd.instanceId, ContextType.project, project.id],
    );
    const grants = await userGrantsWhere(tx, cmd.instanceId, "project_id", [project.id]);
    return [
      ...memberships.map((m) =>
        removeMembershipEvent(m.id, project.org_id, {
          context_type: ContextType.project,
          context_id: project.id,
          user_id: m.user_id,
        }),
      ),
      ...grants.map((g) => cascadeRemoveUserGrant(g, "project_removed")),
      projectEvent(project, ProjectEvent.removed, { name: project.name }),
    ];
  });
  return version;
}

// ------------------------------------------------------------------------------------------------- roles

interface RoleRow {
  key: string;
  display_name: string;
  group_name: string;
  sequence: number;
  changed_at: Date;
  [key: string]: unknown;
}

async function readRole(tx: CommandTx, instanceId: string, projectId: string, key: string) {
  const rows = await tx.query<RoleRow>(
    "SELECT key, display_name, group_name, sequence, changed_at FROM project_roles WHERE instance_id = $1 AND project_id = $2 AND key = $3",
    [instanceId, projectId, key],
  );
  return rows[0];
}

/** Adds a role; its key is unique in the project (ALREADY_EXISTS). */
export async function addProjectRole(
  eventStore: EventStore,
  cmd: Command & { projectId: string; role: RoleAddedPayload },
): Promise<Version> {
  const { version } = await onProject(eventStore, cmd, async (project, tx) => {
    if (await readRole(tx, cmd.instanceId, project.id, cmd.role.key))
      throw new AlreadyExistsError(`the project already has a role "${cmd.role.key}"`);
    return [projectEvent(project, ProjectEvent.roleAdded, cmd.role)];
  });
  return version;
}

/** Changes display name and group (those given that differ); none: no event. */
export async function changeProjectRole(
  eventStore: EventStore,
  cmd: Command & { projectId: string; key: string; displayName?: string; group?: string },
): Promise<Version> {
  let role: RoleRow | undefined;
  const { version } = await onProject(
    eventStore,
    cmd,
    async (project, tx) => {
      role = await readRole(tx, cmd.instanceId, project.id, cmd.key);
      if (!role) throw new NotFoundError("role not found");
      const change: RoleChangedPayload = { key: cmd.key };
      if (cmd.displayName !== undefined && cmd.displayName !== role.display_name)
        change.display_name = cmd.displayName;
      if (cmd.group !== undefined && cmd.group !== role.group_name) change.group = cmd.group;
      return Object.keys(change).length > 1 ? [projectEvent(project, ProjectEvent.roleChanged, change)] : [];
    },
    () => versionOf(role!),
  );
  return version;
}

/**
 * Removes a role and, in the same push, takes it away from every project grant (`project.grant.cascade.
 * changed`) and user grant (`user_grant.cascade.changed`) of the project that holds it.
 */
export async function removeProjectRole(
  eventStore: EventStore,
  cmd: Command & { projectId: string; key: string },
): Promise<Version> {
  const { version } = await onProject(eventStore, cmd, async (project, tx) => {
    if (!(await readRole(tx, cmd.instanceId, project.id, cmd.key))) throw new NotFoundError("role not found");
    const events = [projectEvent(project, ProjectEvent.roleRemoved, { key: cmd.key })];
    const grants = await tx.query<{ id: string; role_keys: string[] }>(
      "SELECT id, role_keys FROM project_grants WHERE instance_id = $1 AND project_id = $2 AND $3 = ANY(role_keys) ORDER BY id",
      [cmd.instanceId, project.id, cmd.key],
    );
    for (const g of grants) {
      events.push(
        projectEvent(project, ProjectEvent.grantCascadeChanged, {
          grant_id: g.id,
          role_keys: g.role_keys.filter((k) => k !== cmd.key),
        }),
      );
    }
    const userGrants = await userGrantsWhere(tx, cmd.instanceId, "project_id", [project.id]);
    events.push(...cascadeNarrowUserGrants(userGrants, new Set([cmd.key])));
    return events;
  });
  return version;
}

// -------------------------------------------------------------------------------------------------- apps

async function appOf(tx: CommandTx, instanceId: string, projectId: string, appId: string): Promise<AppRow> {
  const app = await readApp(tx, instanceId, projectId, appId);
  if (!app) throw new NotFoundError("app not found");
  return app;
}

/**
 * Adds an OIDC or API app (configuration already normalized and checked) with a new client ID and, for
 * secret-based authentication methods, a client secret: returned here once, stored as SHA-256.
 */
export async function addApp(
  eventStore: EventStore,
  cmd: Command & { projectId: string; name: string } & (
      | { oidc: OidcConfig; api?: undefined }
      | { api: ApiConfig; oidc?: undefined }
    ),
): Promise<{ appId: string; clientId: string; clientSecret?: string; version: Version }> {
  const appId = newId();
  const kind = cmd.oidc ? AppKind.oidc : AppKind.api;
  const config = cmd.oidc ?? cmd.api!;
  const clientSecret = usesSecret(kind, config.auth_method) ? randomToken() : undefined;
  let clientId = "";
  const { version } = await onProject(eventStore, cmd, async (project) => {
    clientId = newClientId(project.name);
    return [
      projectEvent(project, kind === AppKind.oidc ? ProjectEvent.oidcAppAdded : ProjectEvent.apiAppAdded, {
        app_id: appId,
        name: cmd.name,
        client_id: clientId,
        ...(clientSecret ? { secret_hash: sha256(clientSecret) } : {}),
        config,
      }),
    ];
  });
  return { appId, clientId, clientSecret, version };
}

/**
 * Renames an app and/or changes fields of its configuration (of the app's kind: FAILED_PRECONDITION
 * otherwise): the fields given replace the current ones, the others are kept, and the configuration that
 * results is normalized and checked as on creation (INVALID_ARGUMENT naming the field under `field`, e.g.
 * `app.oidc`). A method without a secret removes the secret (`project.app.secret.removed`). Nothing
 * different: no event.
 */
export async function changeApp(
  eventStore: EventStore,
  cmd: Command & {
    projectId: string;
    appId: string;
    name?: string;
    oidc?: Partial<OidcConfig>;
    api?: Partial<ApiConfig>;
    /** Path of the configuration in the request, for errors (default `app.oidc`). */
    field?: string;
  },
): Promise<Version> {
  let app: AppRow | undefined;
  const { version } = await onProject(
    eventStore,
    cmd,
    async (project, tx) => {
      app = await appOf(tx, cmd.instanceId, project.id, cmd.appId);
      const events: NewEvent[] = [];
      if (cmd.name !== undefined && cmd.name !== app.name)
        events.push(projectEvent(project, ProjectEvent.appChanged, { app_id: app.id, name: cmd.name }));
      const change = cmd.oidc ?? cmd.api;
      if (change) {
        const kind = cmd.oidc ? AppKind.oidc : AppKind.api;
        if (kind !== app.type)
          throw new FailedPreconditionError(
            `the app is an ${app.type === AppKind.oidc ? "OIDC" : "API"} app: its configuration is app.${app.type === AppKind.oidc ? "oidc" : "api"}`,
          );
        const current = configOf(app);
        const config =
          kind === AppKind.oidc
            ? patchedOidcConfig(current as OidcConfig, change as Partial<OidcConfig>, cmd.field ?? "app.oidc")
            : { ...(current as ApiConfig), ...definedOnly(change) };
        if (!sameConfig(config, current)) {
          events.push(
            projectEvent(
              project,
              kind === AppKind.oidc ? ProjectEvent.oidcConfigChanged : ProjectEvent.apiConfigChanged,
              { app_id: app.id, config },
            ),
          );
          if (app.client_secret_hash && !usesSecret(kind, config.auth_method))
            events.push(projectEvent(project, ProjectEvent.appSecretRemoved, { app_id: app.id }));
        }
      }
      return events;
    },
    () => versionOf(app!),
  );
  return version;
}

/** The members of a patch that are given (undefined means "not given", so it keeps the current value). */
function definedOnly<T extends object>(patch: Partial<T>): Partial<T> {
  return Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== undefined)) as Partial<T>;
}

/** The current OIDC configuration with the patch's members, normalized and checked as a whole. */
function patchedOidcConfig(current: OidcConfig, patch: Partial<OidcConfig>, field: string): OidcConfig {
  const config = normalizeOidcConfig({ ...current, ...definedOnly(patch) });
  checkOidcConfig(config, field);
  return config;
}

/** A new client secret for an app whose method uses one; the old one stops working with this event. */
export async function regenerateAppSecret(
  eventStore: EventStore,
  cmd: Command & { projectId: string; appId: string },
): Promise<{ clientSecret: string; version: Version }> {
  const clientSecret = randomToken();
  const { version } = await onProject(eventStore, cmd, async (project, tx) => {
    const app = await appOf(tx, cmd.instanceId, project.id, cmd.appId);
    if (!usesSecret(app.type, Number(app.auth_method)))
      throw new FailedPreconditionError("the app's authentication method uses no client secret");
    return [
      projectEvent(project, ProjectEvent.appSecretChanged, {
        app_id: app.id,
        secret_hash: sha256(clientSecret),
      }),
    ];
  });
  return { clientSecret, version };
}

/** Adds a public key to an app authenticating with private_key_jwt (FAILED_PRECONDITION otherwise). */
export async function addAppKey(
  eventStore: EventStore,
  cmd: Command & { projectId: string; appId: string; keyId: string; publicKey: string; expiration?: string },
): Promise<Version> {
  const { version } = await onProject(eventStore, cmd, async (project, tx) => {
    const app = await appOf(tx, cmd.instanceId, project.id, cmd.appId);
    if (!usesKeys(app.type, Number(app.auth_method)))
      throw new FailedPreconditionError(
        "keys exist only for apps with the authentication method private_key_jwt",
      );
    return [
      projectEvent(project, ProjectEvent.appKeyAdded, {
        app_id: app.id,
        key_id: cmd.keyId,
        public_key: cmd.publicKey,
        ...(cmd.expiration ? { expiration: cmd.expiration } : {}),
      }),
    ];
  });
  return version;
}

export async function removeAppKey(
  eventStore: EventStore,
  cmd: Command & { projectId: string; appId: string; keyId: string },
): Promise<Version> {
  const { version } = await onProject(eventStore, cmd, async (project, tx) => {
    await appOf(tx, cmd.instanceId, project.id, cmd.appId);
    const keys = await tx.query("SELECT 1 FROM app_keys WHERE instance_id = $1 AND app_id = $2 AND id = $3", [
      cmd.instanceId,
      cmd.appId,
      cmd.keyId,
    ]);
    if (keys.length === 0) throw new NotFoundError("key not found");
    return [projectEvent(project, ProjectEvent.appKeyRemoved, { app_id: cmd.appId, key_id: cmd.keyId })];
  });
  return version;
}

/** Removes an app with its keys; its client ID stops working. */
export async function removeApp(
  eventStore: EventStore,
  cmd: Command & { projectId: string; appId: string },
): Promise<Version> {
  const { version } = await onProject(eventStore, cmd, async (project, tx) => {
    const app = await appOf(tx, cmd.instanceId, project.id, cmd.appId);
    return [projectEvent(project, ProjectEvent.appRemoved, { app_id: app.id, client_id: app.client_id })];
  });
  return version;
}

// ---------------------------------------------------------------------------------------- project grants

interface GrantRow {
  id: string;
  granted_org_id: string;
  role_keys: string[];
  state: number;
  sequence: number;
  changed_at: Date;
  [key: string]: unknown;
}

async function grantOf(tx: CommandTx, instanceId: string, projectId: string, grantId: string) {
  const rows = await tx.query<GrantRow>(
    "SELECT id, granted_org_id, role_keys, state, sequence, changed_at FROM project_grants WHERE instance_id = $1 AND project_id = $2 AND id = $3",
    [instanceId, projectId, grantId],
  );
  if (!rows[0]) throw new NotFoundError("project grant not found");
  return rows[0];
}

/** Every key must be a role of the project (INVALID_ARGUMENT naming `field[i]`). */
async function checkProjectRoles(
  tx: CommandTx,
  instanceId: string,
  projectId: string,
  keys: string[],
  field: string,
): Promise<void> {
  const rows = await tx.query<{ key: string }>(
    "SELECT key FROM project_roles WHERE instance_id = $1 AND project_id = $2 AND key = ANY($3)",
    [instanceId, projectId, keys],
  );
  const existing = new Set(rows.map((r) => r.key));
  keys.forEach((key, i) => {
    if (!existing.has(key))
      throw new InvalidArgumentError(`"${key}" is not a role of the project`, `${field}[${i}]`);
  });
}

/**
 * Lets another organization give some of the project's roles. One grant per project and organization
 * (ALREADY_EXISTS); the project's own organization cannot be granted.
 */
export async function addProjectGrant(
  eventStore: EventStore,
  cmd: Command & {
    projectId: string;
    grantedOrgId: string;
    roleKeys: string[];
    fields: { grantedOrgId: string; roleKeys: string };
  },
): Promise<{ grantId: string; version: Version }> {
  const grantId = newId();
  const stored = await eventStore.push(cmd, async (tx) => {
    // organization before project, as lockOrgForRemoval takes them
    await holdOrg(tx, cmd.instanceId, cmd.grantedOrgId);
    const project = await holdProject(tx, cmd.instanceId, cmd.projectId, "UPDATE");
    await tx.expect(PROJECT, cmd.projectId);
    if (project.org_id === cmd.grantedOrgId)
      throw new InvalidArgumentError(
        "must be another organization than the project's",
        cmd.fields.grantedOrgId,
      );
    const existing = await tx.query(
      "SELECT 1 FROM project_grants WHERE instance_id = $1 AND project_id = $2 AND granted_org_id = $3",
      [cmd.instanceId, project.id, cmd.grantedOrgId],
    );
    if (existing.length) throw new AlreadyExistsError("the organization already has a grant of this project");
    await checkProjectRoles(tx, cmd.instanceId, project.id, cmd.roleKeys, cmd.fields.roleKeys);
    return [
      projectEvent(project, ProjectEvent.grantAdded, {
        grant_id: grantId,
        granted_org_id: cmd.grantedOrgId,
        role_keys: cmd.roleKeys,
      }),
    ];
  });
  return { grantId, version: versionAfter(stored, PROJECT, cmd.projectId) };
}

/**
 * Replaces the role keys of a project grant (each a role of the project); keys taken away are taken from
 * the user grants made through it (`user_grant.cascade.changed`). The same set: no event.
 */
export async function changeProjectGrant(
  eventStore: EventStore,
  cmd: Command & { projectId: string; grantId: string; roleKeys: string[]; field: string },
): Promise<Version> {
  let grant: GrantRow | undefined;
  const { version } = await onProject(
    eventStore,
    cmd,
    async (project, tx) => {
      grant = await grantOf(tx, cmd.instanceId, project.id, cmd.grantId);
      const current = grant.role_keys;
      const same = cmd.roleKeys.length === current.length && cmd.roleKeys.every((k) => current.includes(k));
      if (cmd.roleKeys.length === 0 || same) return [];
      await checkProjectRoles(tx, cmd.instanceId, project.id, cmd.roleKeys, cmd.field);
      const removed = new Set(current.filter((k) => !cmd.roleKeys.includes(k)));
      const userGrants = await userGrantsWhere(tx, cmd.instanceId, "project_grant_id", [grant.id]);
      return [
        projectEvent(project, ProjectEvent.grantChanged, { grant_id: grant.id, role_keys: cmd.roleKeys }),
        ...cascadeNarrowUserGrants(userGrants, removed),
      ];
    },
    () => versionOf(grant!),
  );
  return version;
}

/** deactivate: ACTIVE → INACTIVE, reactivate: INACTIVE → ACTIVE (FAILED_PRECONDITION otherwise). */
export async function setProjectGrantState(
  eventStore: EventStore,
  cmd: Command & { projectId: string; grantId: string; action: "deactivate" | "reactivate" },
): Promise<Version> {
  const { version } = await onProject(eventStore, cmd, async (project, tx) => {
    const grant = await grantOf(tx, cmd.instanceId, project.id, cmd.grantId);
    if (cmd.action === "deactivate") {
      if (grant.state !== ProjectGrantState.active)
        throw new FailedPreconditionError("only an active project grant can be deactivated");
      return [projectEvent(project, ProjectEvent.grantDeactivated, { grant_id: grant.id })];
    }
    if (grant.state !== ProjectGrantState.inactive)
      throw new FailedPreconditionError("the project grant is not inactive");
    return [projectEvent(project, ProjectEvent.grantReactivated, { grant_id: grant.id })];
  });
  return version;
}

/** Removes a project grant and the user grants made through it (`user_grant.cascade.removed`). */
export async function removeProjectGrant(
  eventStore: EventStore,
  cmd: Command & { projectId: string; grantId: string },
): Promise<Version> {
  const { version } = await onProject(eventStore, cmd, async (project, tx) => {
    const grant = await grantOf(tx, cmd.instanceId, project.id, cmd.grantId);
    const userGrants = await userGrantsWhere(tx, cmd.instanceId, "project_grant_id", [grant.id]);
    return [
      ...userGrants.map((g) => cascadeRemoveUserGrant(g, "project_grant_removed")),
      projectEvent(project, ProjectEvent.grantRemoved, {
        grant_id: grant.id,
        granted_org_id: grant.granted_org_id,
      }),
    ];
  });
  return version;
}
