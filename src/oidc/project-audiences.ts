import { INSTANCE } from "../domain/instance/events.ts";
import { ORG } from "../domain/org/events.ts";
import { PROJECT, ProjectGrantState } from "../domain/project/events.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
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
 * per process, by instance, organization and project, for yes and for no:
 * - every project, organization or instance event of an instance drops that instance's answers when it
 *   commits (project removed, project grant added, deactivated or removed, project moved with its
 *   organization...): this process sees its own writes at once, other processes on the same PostgreSQL
 *   database when the event store's notification arrives (src/eventstore/broadcast.ts);
 * - a lookup that ran across such an invalidation is not cached (it may have read the state before it);
 * - when notifications may have been missed everything is dropped (`onStale`), and no answer is older than
 *   AUDIENCE_CACHE_MS in any case.
 */
export class ProjectAudiences {
  private readonly cache = new Map<string, { open: boolean; until: number }>();
  /** Counts invalidations (see `openTo`). */
  private generation = 0;

  constructor(
    private readonly db: Queryable,
    eventStore?: EventStore,
  ) {
    eventStore?.onCommitted((events) => {
      for (const e of events) {
        if (e.aggregateType === PROJECT || e.aggregateType === ORG || e.aggregateType === INSTANCE)
          this.invalidate(e.instanceId);
      }
    });
    eventStore?.onStale(() => this.invalidate());
  }

  /** Which of these projects belong to the organization or are granted to it by an active project grant. */
  async openTo(instanceId: string, orgId: string, projectIds: readonly string[]): Promise<Set<string>> {
    const open = new Set<string>();
    const missing: string[] = [];
    const now = Date.now();
    for (const id of projectIds) {
      const cached = this.cache.get(key(instanceId, orgId, id));
      if (cached && cached.until > now) {
        if (cached.open) open.add(id);
      } else missing.push(id);
    }
    if (missing.length === 0) return open;
    const generation = this.generation;
    const found = await projectsOpenTo(this.db, instanceId, orgId, missing);
    for (const id of found) open.add(id);
    // a lookup that ran across an invalidation may have read what was before it: answered, not kept
    if (generation !== this.generation) return open;
    const until = Date.now() + AUDIENCE_CACHE_MS;
    for (const id of missing) {
      if (this.cache.size >= AUDIENCE_CACHE_MAX) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(key(instanceId, orgId, id), { open: found.has(id), until });
    }
    return open;
  }

  /** Forgets the answers of an instance (all when none is given). */
  invalidate(instanceId?: string): void {
    this.generation++;
    if (instanceId === undefined) {
      this.cache.clear();
      return;
    }
    const prefix = `${instanceId}\u0000`;
    for (const k of this.cache.keys()) if (k.startsWith(prefix)) this.cache.delete(k);
  }
}

function key(instanceId: string, orgId: string, projectId: string): string {
  return `${instanceId}\u0000${orgId}\u0000${projectId}`;
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
