/**
 * Identity providers (docs/identity-providers.md): the `idp` aggregate (ID: a new
 * ID), a reusable resource owned by the instance or by an organization. Its events carry the configuration
 * without the client secret (kept sealed in `idp_client_secrets`, written by the commands) and the state
 * policies child contexts (organizations viewing an instance's provider) set for it.
 */
import type { StoredEvent } from "../../eventstore/types.ts";

export const IDP = "idp";

export const IdpEvent = {
  /** The whole provider: owner, type, name, state in the owning context, options, config. */
  added: "idp.added",
  /** Only what changed (`options` and `config` whole when they changed); `client_secret_changed` flags a new secret. */
  changed: "idp.changed",
  /** A child context's ACTIVATE / DEACTIVATE policy. */
  statePolicySet: "idp.state_policy.set",
  /** A child context's policy removed (INHERIT again). */
  statePolicyRemoved: "idp.state_policy.removed",
  removed: "idp.removed",
} as const;

/** ProviderType numbers of the API for the types this service manages. */
export const IdpType = { oidc: 1, oauth: 4, codehostB: 8, codehostBSelfHosted: 9 } as const;
export type IdpType = (typeof IdpType)[keyof typeof IdpType];

/** AutoLinkingOption of the API. */
export const AutoLinking = { unspecified: 0, username: 1, email: 2 } as const;
export type AutoLinking = (typeof AutoLinking)[keyof typeof AutoLinking];

export interface IdpOptions {
  is_manual_linking_allowed: boolean;
  is_manual_creation_allowed: boolean;
  is_auto_creation: boolean;
  is_auto_update: boolean;
  auto_linking: AutoLinking;
}

/** The configuration of every type, without the client secret (members per type: docs/identity-providers.md). */
export interface IdpConfig {
  client_id: string;
  scopes: string[];
  /** oidc, codehost_b_self_hosted. */
  issuer?: string;
  /** oauth. */
  authorization_endpoint?: string;
  token_endpoint?: string;
  user_endpoint?: string;
  id_attribute?: string;
  /** oidc. */
  is_id_token_mapping?: boolean;
}

/** OwnerType of the owning context: 2 instance, 3 organization. */
export type IdpOwnerType = 2 | 3;

/** State in the owning context: 1 active, 2 inactive. */
export type IdpState = 1 | 2;

/** A child context's own policy: 1 ACTIVATE, 2 DEACTIVATE (INHERIT is the absence of one). */
export type ChildPolicy = 1 | 2;

/** Payload of `idp.added`. */
export interface IdpFields {
  owner_type: IdpOwnerType;
  owner_id: string;
  type: IdpType;
  name: string;
  state: IdpState;
  options: IdpOptions;
  config: IdpConfig;
}

export interface IdpAggregate extends IdpFields {
  /** Policies of child contexts by context (organization) ID. */
  policies: Map<string, ChildPolicy>;
  sequence: number;
  changedAt: Date;
}

/** Current state of a provider from its events; undefined when it does not exist. */
export function foldIdp(events: StoredEvent[]): IdpAggregate | undefined {
  let state: IdpAggregate | undefined;
  for (const e of events) {
    const p = (e.payload ?? {}) as Record<string, unknown>;
    switch (e.type) {
      case IdpEvent.added:
        state = {
          ...(p as unknown as IdpFields),
          policies: new Map(),
          sequence: e.sequence,
          changedAt: e.createdAt,
        };
        break;
      case IdpEvent.changed:
        if (state) {
          const { client_secret_changed: _, ...rest } = p;
          state = { ...state, ...(rest as Partial<IdpFields>), sequence: e.sequence, changedAt: e.createdAt };
        }
        break;
      case IdpEvent.statePolicySet:
        if (state) {
          state.policies.set(String(p.context_id), p.policy as ChildPolicy);
          state = { ...state, sequence: e.sequence, changedAt: e.createdAt };
        }
        break;
      case IdpEvent.statePolicyRemoved:
        if (state) {
          state.policies.delete(String(p.context_id));
          state = { ...state, sequence: e.sequence, changedAt: e.createdAt };
        }
        break;
      case IdpEvent.removed:
        state = undefined;
        break;
    }
  }
  return state;
}
