/**
 * Reusable resources (docs/identity-providers.md, docs/architecture.md): a resource created in one
 * context (the instance or an organization) that is also visible in the child contexts of that context
 * (the organizations of an instance). Each child context chooses the resource's state there with a state
 * policy: INHERIT (default, no row) follows the owning context, ACTIVATE / DEACTIVATE decide for the child
 * alone. The configuration is read-only in child contexts; the policies live in
 * `reusable_state_policies` (migration 0070_idps.sql), one row per (resource, child context).
 *
 * A resource's read-model table follows one convention so that this module can compute, in SQL, what a
 * context sees: columns `instance_id`, `id`, `owner_type` (OwnerType: 2 instance, 3 organization),
 * `owner_id` and `state` (the state in the owning context: 1 active, 2 inactive). `reusableView` gives the
 * join, the visibility condition and the expressions of the effective state, the viewing context's policy
 * and the state in the parent, to put into one query (a whole search page in one statement).
 *
 * Used by identity providers (src/query/idps.ts, src/services/idps); further reusable resources use the
 * same table and functions with their own `resource_type`.
 */
import type { Queryable } from "../storage/database.ts";

/** StatePolicy of the API (platform.object.v3alpha.StatePolicy). */
export const StatePolicy = { unspecified: 0, activate: 1, deactivate: 2, inherit: 3 } as const;
export type StatePolicy = (typeof StatePolicy)[keyof typeof StatePolicy];

/** Effective state of the API (platform.object.v3alpha.State). */
export const EffectiveState = { unspecified: 0, active: 1, inactive: 2 } as const;
export type EffectiveState = (typeof EffectiveState)[keyof typeof EffectiveState];

/** OwnerType of the contexts a reusable resource can be created in. */
export const ReusableOwner = { instance: 2, org: 3 } as const;
export type ReusableOwner = (typeof ReusableOwner)[keyof typeof ReusableOwner];

/** The context from which resources are viewed: the instance, or an organization of it. */
export interface Viewpoint {
  instanceId: string;
  /** Set for an organization's view. */
  orgId?: string;
}

/** SQL pieces of a query that reads reusable resources as a context sees them. */
export interface ReusableView {
  /** A LEFT JOIN of the viewing context's policies (empty for the instance's view). */
  join: string;
  /** Condition: the resource is visible in the viewing context. */
  visible: string;
  /** smallint expression: EffectiveState in the viewing context. */
  effectiveState: string;
  /** smallint expression: the viewing context's StatePolicy (INHERIT in a child without a policy). */
  statePolicy: string;
  /** smallint expression: the state in the owning (parent) context when viewed from a child; else NULL. */
  parentState: string;
  /** The select list of the four computed columns: effective_state, state_policy, parent_state, is_child. */
  columns: string;
}

/**
 * What `view` sees of the resources of table alias `alias` (convention above) of type `resourceType`.
 * `p` turns a value into a placeholder of the query (Where.param).
 *
 * Instance view: every resource of the instance (its own and all its organizations'), each as its owner
 * sees it. Organization view: the organization's own resources (as the owner sees them) and the instance's
 * (as a child: its policy decides, INHERIT follows the instance's state).
 */
export function reusableView(
  alias: string,
  resourceType: string,
  view: Viewpoint,
  p: (value: unknown) => string,
): ReusableView {
  const ownState = `${alias}.state`;
  if (!view.orgId) {
    return {
      join: "",
      visible: "TRUE",
      effectiveState: ownState,
      // in the owning context the policy is the state chosen there: ACTIVATE(1) ↔ active(1), DEACTIVATE(2) ↔ inactive(2)
      statePolicy: ownState,
      parentState: "NULL::smallint",
      columns: `${ownState} AS effective_state, ${ownState} AS state_policy, NULL::smallint AS parent_state, false AS is_child`,
    };
  }
  const sp = `${alias}_sp`;
  const isChild = `(${alias}.owner_type = ${ReusableOwner.instance})`;
  const join = `LEFT JOIN reusable_state_policies ${sp} ON ${sp}.instance_id = ${alias}.instance_id
    AND ${sp}.resource_type = ${p(resourceType)} AND ${sp}.resource_id = ${alias}.id
    AND ${sp}.context_id = ${p(view.orgId)}`;
  const effectiveState = `(CASE WHEN NOT ${isChild} THEN ${ownState}
    WHEN ${sp}.policy = ${StatePolicy.activate} THEN ${EffectiveState.active}
    WHEN ${sp}.policy = ${StatePolicy.deactivate} THEN ${EffectiveState.inactive}
    ELSE ${ownState} END)::smallint`;
  const statePolicy = `(CASE WHEN ${isChild} THEN coalesce(${sp}.policy, ${StatePolicy.inherit}) ELSE ${ownState} END)::smallint`;
  const parentState = `(CASE WHEN ${isChild} THEN ${ownState} END)::smallint`;
  return {
    join,
    visible: `(${isChild} OR (${alias}.owner_type = ${ReusableOwner.org} AND ${alias}.owner_id = ${p(view.orgId)}))`,
    effectiveState,
    statePolicy,
    parentState,
    columns: `${effectiveState} AS effective_state, ${statePolicy} AS state_policy, ${parentState} AS parent_state, ${isChild} AS is_child`,
  };
}

/** The computed columns of `reusableView(...).columns` as read. */
export interface ReusableColumns {
  effective_state: number;
  state_policy: number;
  parent_state: number | null;
  is_child: boolean;
}

/** Where a resource lives, as its read-model row says. */
export interface ReusableOwnerRow {
  owner_type: number;
  owner_id: string;
}

/**
 * How a context relates to a resource: "owner" (it owns it, or it is the instance looking at an
 * organization's resource: the owner's view), "child" (an organization viewing its instance's resource),
 * or undefined (another organization's resource: not visible there).
 */
export function relation(resource: ReusableOwnerRow, view: Viewpoint): "owner" | "child" | undefined {
  if (!view.orgId) return "owner";
  if (resource.owner_type === ReusableOwner.instance) return "child";
  return resource.owner_id === view.orgId ? "owner" : undefined;
}

// ---- projection helpers (called by the projections of reusable resources) ----

/** Sets a child context's ACTIVATE / DEACTIVATE policy of a resource. */
export async function setStatePolicy(
  tx: Queryable,
  key: { instanceId: string; resourceType: string; resourceId: string; contextId: string },
  policy: StatePolicy,
  at: Date,
): Promise<void> {
  await tx.query(
    `INSERT INTO reusable_state_policies (instance_id, resource_type, resource_id, context_id, policy, changed_at)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (instance_id, resource_type, resource_id, context_id)
     DO UPDATE SET policy = EXCLUDED.policy, changed_at = EXCLUDED.changed_at`,
    [key.instanceId, key.resourceType, key.resourceId, key.contextId, policy, at],
  );
}

/** Removes a child context's policy (back to INHERIT). */
export async function removeStatePolicy(
  tx: Queryable,
  key: { instanceId: string; resourceType: string; resourceId: string; contextId: string },
): Promise<void> {
  await tx.query(
    `DELETE FROM reusable_state_policies
     WHERE instance_id = $1 AND resource_type = $2 AND resource_id = $3 AND context_id = $4`,
    [key.instanceId, key.resourceType, key.resourceId, key.contextId],
  );
}

/** Removes every policy of a resource (the resource was deleted). */
export async function removeResourcePolicies(
  tx: Queryable,
  instanceId: string,
  resourceType: string,
  resourceId: string,
): Promise<void> {
  await tx.query(
    "DELETE FROM reusable_state_policies WHERE instance_id = $1 AND resource_type = $2 AND resource_id = $3",
    [instanceId, resourceType, resourceId],
  );
}

/** Removes every policy a context set (the organization was removed). */
export async function removeContextPolicies(
  tx: Queryable,
  instanceId: string,
  contextId: string,
): Promise<void> {
  await tx.query("DELETE FROM reusable_state_policies WHERE instance_id = $1 AND context_id = $2", [
    instanceId,
    contextId,
  ]);
}
