import type { Queryable } from "../storage/database.ts";

export interface InstanceInfo {
  id: string;
  name: string;
  primaryDomain: string;
  defaultOrgId: string;
  iamProjectId: string;
  blocked: boolean;
}

interface InstanceRow {
  id: string;
  name: string;
  default_org_id: string | null;
  iam_project_id: string | null;
  blocked: boolean;
  primary_domain: string | null;
  [key: string]: unknown;
}

const SELECT_INSTANCE = `
  SELECT i.id, i.name, i.default_org_id, i.iam_project_id, i.blocked,
         (SELECT d.domain FROM instance_domains d WHERE d.instance_id = i.id AND d.is_primary) AS primary_domain
  FROM instances i`;

/**
 * Host → instance, cached. Only found instances are cached, so a new instance's domain resolves at
 * once; writes invalidate entries immediately (see `invalidate`; other processes' when their notification
 * arrives), and entries expire after `ttlMs` in any case.
 */
export class InstanceDirectory {
  private readonly byHostCache = new Map<string, { info: InstanceInfo; expires: number }>();

  constructor(
    private readonly db: Queryable,
    private readonly ttlMs = 5_000,
  ) {}

  async byHost(host: string): Promise<InstanceInfo | undefined> {
    const domain = hostWithoutPort(host);
    const cached = this.byHostCache.get(domain);
    if (cached && cached.expires > Date.now()) return cached.info;
    const rows = await this.db.query<InstanceRow>(
      `${SELECT_INSTANCE} WHERE i.id = (SELECT instance_id FROM instance_domains WHERE domain = $1)`,
      [domain],
    );
    const info = rows[0] ? toInfo(rows[0]) : undefined;
    if (info) this.byHostCache.set(domain, { info, expires: Date.now() + this.ttlMs });
    else this.byHostCache.delete(domain);
    return info;
  }

  async byId(id: string): Promise<InstanceInfo | undefined> {
    const rows = await this.db.query<InstanceRow>(`${SELECT_INSTANCE} WHERE i.id = $1`, [id]);
    return rows[0] ? toInfo(rows[0]) : undefined;
  }

  /** Drops cached entries of an instance (all when no ID is given). */
  invalidate(instanceId?: string): void {
    for (const [host, entry] of this.byHostCache) {
      if (instanceId === undefined || entry.info.id === instanceId) this.byHostCache.delete(host);
    }
  }
}

function toInfo(row: InstanceRow): InstanceInfo {
  return {
    id: row.id,
    name: row.name,
    primaryDomain: row.primary_domain ?? "",
    defaultOrgId: row.default_org_id ?? "",
    iamProjectId: row.iam_project_id ?? "",
    blocked: row.blocked,
  };
}

/** `Example.com:8080` → `example.com`; `[::1]:8080` → `::1`. */
export function hostWithoutPort(host: string): string {
  const lower = host.trim().toLowerCase();
  if (lower.startsWith("[")) return lower.slice(1, lower.indexOf("]") > 0 ? lower.indexOf("]") : undefined);
  const colon = lower.lastIndexOf(":");
  return colon > 0 && lower.indexOf(":") === colon ? lower.slice(0, colon) : lower;
}
