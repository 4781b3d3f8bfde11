import { INSTANCE } from "../domain/instance/events.ts";
import { ORG } from "../domain/org/events.ts";
import { PROJECT, ProjectGrantState } from "../domain/project/events.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import { InvalidatedCache } from "../query/invalidated-cache.ts";
import type { Queryable } from "../storage/database.ts";

/**
 * How long an answer is reused: the bound should another process's change notification be lost (as the
 * client cache's, ./clients.ts).
 */
const AUDIENCE_CACHE_MS = 2_000;
/** Entries kept at most (unknown project IDs are cached too, so probing cannot grow it without bound). */
const AUDIENCE_CACHE_MAX = 10_000;

/**
 * Which projects an organization's clients may name in an audience scope
 * (`urn:platform:iam:org:project:id:<id>:aud`): the organization's own projects and those granted to it by
 * an active project grant. Asked by every token request with an audience scope, so the answers are cached
 * per process (../query/invalidated-cache.ts), by instance, organization and project, for yes and for no:
 * every project, organization or instance event of an instance drops that instance's answers (project
 * removed, project grant added, deactivated or removed, project moved with its organization...).
 */
export class ProjectAudiences {
  private readonly cache: InvalidatedCache<boolean>;

  constructor(
    private readonly db: Queryable,
    eventStore?: EventStore,
  ) {
    this.cache = new InvalidatedCache({
      ttlMs: AUDIENCE_CACHE_MS,
      max: AUDIENCE_CACHE_MAX,
      eventStore,
      staleBy: (e) =>
        e.aggregateType === PROJECT || e.aggregateType === ORG || e.aggregateType === INSTANCE
          ? { scope: e.instanceId }
          : undefined,
    });
  }

  /** Which of these projects belong to the organization or are granted to it by an active project grant. */
  async openTo(instanceId: string, orgId: string, projectIds: readonly string[]): Promise<Set<string>> {
    const open = new Set<string>();
    const missing: string[] = [];
    for (const id of projectIds) {
      const cached = this.cache.get(InvalidatedCache.key(instanceId, orgId, id));
      if (!cached) missing.push(id);
      else if (cached.value) open.add(id);
    }
    if (missing.length === 0) return open;
    const ticket = this.cache.ticket();
    const found = await projectsOpenTo(this.db, instanceId, orgId, missing);
    for (const id of found) open.add(id);
    for (const id of missing)
      this.cache.set(ticket, InvalidatedCache.key(instanceId, orgId, id), found.has(id));
    return open;
  }

  /** Forgets the answers of an instance (all when none is given). */
  invalidate(instanceId?: string): void {
    this.cache.invalidate(instanceId);
  }
}

async function projectsOpenTo(
  db: Queryable,
  instanceId: string,
  orgId: string,
  projectIds: string[],
): Promise<Set<string>> {
  const rows = await db.query<{ id: string }>(
    `SELECT p.id FROM projects p
     WHERE p.instance_id = $1 AND p.id = ANY($2)
       AND (p.org_id = $3 OR EXISTS (
         SELECT 1 FROM project_grants g
         WHERE g.instance_id = p.instance_id AND g.project_id = p.id AND g.granted_org_id = $3 AND g.state = $4))`,
    [instanceId, projectIds, orgId, ProjectGrantState.active],
  );
  return new Set(rows.map((r) => r.id));
}
