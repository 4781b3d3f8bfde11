/**
 * Whose branding and texts a sign-in shows (docs/branding.md "Projects: whose branding a sign-in shows"):
 * the organization the auth request names (scope `urn:platform:iam:org:id:<id>`: only its users sign in
 * there), else as the `private_labeling_setting` of the project of the auth request's application says
 * (as ZITADEL's):
 *
 * - UNSPECIFIED: the user's organization once the page knows the user, else the instance;
 * - ENFORCE_PROJECT_RESOURCE_OWNER_POLICY: the project's organization, always;
 * - ALLOW_LOGIN_USER_RESOURCE_OWNER_POLICY: the user's organization once known, else the project's.
 *
 * The project's setting and organization are read per client ID through a per-process cache that every
 * project event of the instance clears (here at once, in the other processes when their notification
 * arrives; ../query/invalidated-cache.ts).
 */
import { PROJECT, PrivateLabelingSetting } from "../domain/project/events.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import { type ClientLabeling, labelingOfClient } from "../query/apps.ts";
import { InvalidatedCache } from "../query/invalidated-cache.ts";
import type { Queryable } from "../storage/database.ts";

/** Client IDs kept at most. */
const LABELING_CACHE_MAX = 10_000;

/** Whose branding, texts and language settings a page shows. */
export interface PageLabel {
  /** The organization of the branding and texts; undefined: the instance's. */
  orgId?: string;
  /**
   * The organization whose language settings decide the page's language: the one the auth request names
   * or the project's setting chose; the user's organization does not (as before the setting).
   */
  languageOrgId?: string;
}

/**
 * The label of a page of a sign-in: `requestedOrgId` (the auth request's organization), `project` (the
 * application's project: its setting and organization), `userOrgId` (the organization of the user the
 * page is for, once known).
 */
export function pageLabel(
  requestedOrgId: string | undefined,
  project: ClientLabeling | undefined,
  userOrgId: string | undefined,
): PageLabel {
  if (requestedOrgId) return { orgId: requestedOrgId, languageOrgId: requestedOrgId };
  if (project?.setting === PrivateLabelingSetting.enforceProjectResourceOwnerPolicy)
    return { orgId: project.orgId, languageOrgId: project.orgId };
  if (userOrgId) return { orgId: userOrgId };
  if (project?.setting === PrivateLabelingSetting.allowLoginUserResourceOwnerPolicy)
    return { orgId: project.orgId, languageOrgId: project.orgId };
  return {};
}

/**
 * The organization whose branding and texts a message of a sign-in takes instead of its recipient's: the
 * project's under ENFORCE (unless the auth request names an organization, which is the recipient's);
 * otherwise undefined, the recipient's organization's, since a message always goes to a known user.
 */
export function messageLabelOrg(
  requestedOrgId: string | undefined,
  project: ClientLabeling | undefined,
): string | undefined {
  if (requestedOrgId) return undefined;
  return project?.setting === PrivateLabelingSetting.enforceProjectResourceOwnerPolicy
    ? project.orgId
    : undefined;
}

/** The project setting and organization of each client ID, cached until a project event of its instance. */
export class ClientLabelingCache {
  private readonly cache: InvalidatedCache<ClientLabeling | undefined>;

  constructor(
    private readonly db: Queryable,
    eventStore: EventStore,
    ttlMs = 5_000,
  ) {
    this.cache = new InvalidatedCache({
      ttlMs,
      max: LABELING_CACHE_MAX,
      eventStore,
      // apps (and their client IDs) and the project's setting are events of the project aggregate
      staleBy: (e) => (e.aggregateType === PROJECT ? { scope: e.instanceId } : undefined),
    });
  }

  /** The labeling of a client ID; undefined for "" (the login UI's own sign-ins) and unknown clients. */
  of(instanceId: string, clientId: string): Promise<ClientLabeling | undefined> {
    if (!clientId) return Promise.resolve(undefined);
    return this.cache.through(InvalidatedCache.key(instanceId, clientId), () =>
      labelingOfClient(this.db, instanceId, clientId),
    );
  }
}
