import { type CryptoKey, exportJWK, generateKeyPair, importJWK, type JWK } from "jose";
import { seal, unseal } from "../crypto/masterkey.ts";
import { newId } from "../id.ts";
import type { Database, Queryable } from "../storage/database.ts";

/** Lifetimes of signing keys (contract.md §5: a key signs for at most 6 h and stays published for 30 h). */
export interface KeyPolicy {
  /** How long a key signs. */
  signForMs: number;
  /** How long after it stops signing a key stays published (longer than any token it signed lives). */
  publishAfterMs: number;
  /** How early the next key is created and published before it starts signing (≫ the JWKS max-age). */
  prepublishMs: number;
  /** How long a process reuses the keys it read (other processes' rotations are seen within this). */
  cacheMs: number;
}

export const defaultKeyPolicy: KeyPolicy = {
  signForMs: 6 * 3600_000,
  publishAfterMs: 24 * 3600_000,
  prepublishMs: 3600_000,
  cacheMs: 60_000,
};

export const SIGNING_ALG = "RS256";

export interface SigningKey {
  kid: string;
  alg: string;
  /** The public JWK as published (`kid`, `use`, `alg`, public parts only). */
  publicJwk: JWK;
  publicKey: CryptoKey;
  /** Only for keys that may still sign. */
  privateKey?: CryptoKey;
  createdAt: Date;
  activeFrom: Date;
  activeUntil: Date;
  publishUntil: Date;
}

interface KeyRow {
  instance_id: string;
  id: string;
  alg: string;
  public_jwk: JWK;
  private_key: string;
  created_at: Date;
  active_from: Date;
  active_until: Date;
  publish_until: Date;
  [key: string]: unknown;
}

interface InstanceKeys {
  keys: SigningKey[];
  /** The JWKS document, serialized once. */
  jwks: Buffer;
  loadedAt: number;
}

const SELECT_KEYS =
  "SELECT instance_id, id, alg, public_jwk, private_key, created_at, active_from, active_until, publish_until FROM oidc_signing_keys WHERE instance_id = $1 AND publish_until > now()";

/**
 * The signing keys of every instance (RS256, 2048 bit), their private parts sealed with the master key.
 * The database decides which key signs: the newest whose [active_from, active_until) holds the current
 * time, so every process on one database signs with the same key (up to its cache age). The next key is
 * created `prepublishMs` before the current one stops signing, under an advisory lock (two processes
 * never create two), and published at once, so clients that cache the JWKS know it before it signs.
 */
export class SigningKeys {
  private readonly cache = new Map<string, Promise<InstanceKeys>>();
  /** The settled entries of `cache` (the hot paths skip a promise hop). */
  private readonly loaded = new Map<string, InstanceKeys>();
  /** When a verification missed a kid: reloads for unknown kids are rate-limited per instance. */
  private readonly lastMissReload = new Map<string, number>();

  constructor(
    private readonly db: Database,
    private readonly masterKey: Buffer,
    readonly policy: KeyPolicy = defaultKeyPolicy,
  ) {}

  /** The key that signs now (created when the instance has none yet). */
  async active(instanceId: string): Promise<SigningKey> {
    const entry = this.load(instanceId);
    const loaded = await entry;
    const now = Date.now();
    let key = pickActive(loaded.keys, now);
    const successorDue =
      key !== undefined &&
      key.activeUntil.getTime() - now < this.policy.prepublishMs &&
      !hasNext(loaded.keys, key) &&
      now - loaded.loadedAt > 5_000;
    if (!key || successorDue) {
      // The cached view is stale, or the next key is due: read again (creating keys as needed). Concurrent
      // callers share one reload: only the first replaces the entry they all saw.
      const reloaded = await this.reload(instanceId, entry);
      key = pickActive(reloaded.keys, Date.now()) ?? key;
    }
    if (!key?.privateKey) throw new Error(`no signing key for instance ${instanceId}`);
    return key;
  }

  /** The JWKS document of the instance's published keys. */
  async jwks(instanceId: string): Promise<Buffer> {
    return this.cachedJwks(instanceId) ?? (await this.load(instanceId)).jwks;
  }

  /** The JWKS document when it is at hand in memory (no waiting). */
  cachedJwks(instanceId: string): Buffer | undefined {
    return this.loaded.get(instanceId)?.jwks;
  }

  /** A published key by kid, for verifying tokens this instance signed (undefined: unknown kid). */
  async verificationKey(instanceId: string, kid: string): Promise<SigningKey | undefined> {
    const found = (await this.load(instanceId)).keys.find((k) => k.kid === kid);
    if (found) return found.publishUntil.getTime() > Date.now() ? found : undefined;
    // Perhaps another process rotated since we read: look again, at most once a second per instance.
    const last = this.lastMissReload.get(instanceId) ?? 0;
    if (Date.now() - last < 1000) return undefined;
    this.lastMissReload.set(instanceId, Date.now());
    const reloaded = await this.reload(instanceId, this.load(instanceId));
    return reloaded.keys.find((k) => k.kid === kid);
  }

  /**
   * Rotates on demand: a new key signs from now on; keys signing until now stop signing but stay published
   * until their publish_until (longer than any token they signed lives); keys prepared for later are dropped.
   */
  async rotate(instanceId: string): Promise<SigningKey> {
    const kid = await this.db.transaction(async (tx) => {
      await lockInstanceKeys(tx, instanceId);
      const now = new Date();
      await tx.query("DELETE FROM oidc_signing_keys WHERE instance_id = $1 AND active_from > $2", [
        instanceId,
        now,
      ]);
      await tx.query(
        "UPDATE oidc_signing_keys SET active_until = $2 WHERE instance_id = $1 AND active_until > $2",
        [instanceId, now],
      );
      return this.insertKey(tx, instanceId, now);
    });
    this.forget(instanceId);
    const key = (await this.load(instanceId)).keys.find((k) => k.kid === kid);
    if (!key) throw new Error("the rotated key is missing");
    return key;
  }

  /** Forgets cached keys (of one instance, or all). */
  invalidate(instanceId?: string): void {
    if (instanceId !== undefined) this.forget(instanceId);
    else {
      this.cache.clear();
      this.loaded.clear();
    }
  }

  /** Throws when a stored key does not open with the master key (a wrong PLATFORM_MASTERKEY). */
  async checkMasterKey(): Promise<void> {
    const rows = await this.db.query<KeyRow>(
      "SELECT instance_id, id, private_key FROM oidc_signing_keys ORDER BY created_at DESC LIMIT 1",
    );
    for (const row of rows) {
      try {
        unseal(this.masterKey, row.private_key, sealContext(row.instance_id, row.id));
      } catch {
        throw new Error(
          "PLATFORM_MASTERKEY: does not decrypt the stored OIDC signing keys; use the key they were created with",
        );
      }
    }
  }

  private reload(instanceId: string, stale: Promise<InstanceKeys>): Promise<InstanceKeys> {
    if (this.cache.get(instanceId) === stale) this.forget(instanceId);
    return this.load(instanceId);
  }

  private forget(instanceId: string): void {
    this.cache.delete(instanceId);
    this.loaded.delete(instanceId);
  }

  private load(instanceId: string): Promise<InstanceKeys> {
    const cached = this.cache.get(instanceId);
    if (cached) return cached;
    const loading = this.read(instanceId).then((keys) => {
      if (this.cache.get(instanceId) === loading) this.loaded.set(instanceId, keys);
      setTimeout(() => {
        if (this.cache.get(instanceId) === loading) this.forget(instanceId);
      }, this.policy.cacheMs).unref();
      return keys;
    });
    loading.catch(() => {
      if (this.cache.get(instanceId) === loading) this.forget(instanceId);
    });
    this.cache.set(instanceId, loading);
    return loading;
  }

  /** Reads the instance's keys, creating the current or the next key first when it is due. */
  private async read(instanceId: string): Promise<InstanceKeys> {
    let rows = await this.db.query<KeyRow>(SELECT_KEYS, [instanceId]);
    if (this.keyDue(rows)) {
      rows = await this.db.transaction(async (tx) => {
        await lockInstanceKeys(tx, instanceId);
        let current = await tx.query<KeyRow>(SELECT_KEYS, [instanceId]);
        if (this.keyDue(current)) {
          const now = Date.now();
          const active = pickActiveRow(current, now);
          // No key signs now: the new one signs at once. Else it follows the current one seamlessly.
          const from = active ? new Date(active.active_until) : new Date(now);
          await this.insertKey(tx, instanceId, from);
          current = await tx.query<KeyRow>(SELECT_KEYS, [instanceId]);
        }
        return current;
      });
    }
    const now = Date.now();
    const keys = await Promise.all(
      rows
        .sort((a, b) => new Date(b.active_from).getTime() - new Date(a.active_from).getTime())
        .map((row) => this.toKey(row, now)),
    );
    const jwks = Buffer.from(JSON.stringify({ keys: keys.map((k) => k.publicJwk) }));
    return { keys, jwks, loadedAt: now };
  }

  /** True when no key signs now, or the current one ends within `prepublishMs` and has no successor. */
  private keyDue(rows: KeyRow[]): boolean {
    const now = Date.now();
    const active = pickActiveRow(rows, now);
    if (!active) return true;
    const until = new Date(active.active_until).getTime();
    if (until - now >= this.policy.prepublishMs) return false;
    return !rows.some((r) => new Date(r.active_from).getTime() >= until - 1000);
  }

  private async insertKey(tx: Queryable, instanceId: string, activeFrom: Date): Promise<string> {
    const kid = newId();
    const { publicKey, privateKey } = await generateKeyPair(SIGNING_ALG, {
      modulusLength: 2048,
      extractable: true,
    });
    const publicJwk = { ...(await exportJWK(publicKey)), kid, use: "sig", alg: SIGNING_ALG };
    const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: SIGNING_ALG };
    const activeUntil = new Date(activeFrom.getTime() + this.policy.signForMs);
    const publishUntil = new Date(activeUntil.getTime() + this.policy.publishAfterMs);
    await tx.query(
      `INSERT INTO oidc_signing_keys (instance_id, id, alg, public_jwk, private_key, created_at, active_from, active_until, publish_until)
       VALUES ($1, $2, $3, $4, $5, now(), $6, $7, $8)`,
      [
        instanceId,
        kid,
        SIGNING_ALG,
        JSON.stringify(publicJwk),
        seal(this.masterKey, JSON.stringify(privateJwk), sealContext(instanceId, kid)),
        activeFrom,
        activeUntil,
        publishUntil,
      ],
    );
    return kid;
  }

  private async toKey(row: KeyRow, now: number): Promise<SigningKey> {
    const jwk = typeof row.public_jwk === "string" ? JSON.parse(row.public_jwk) : row.public_jwk;
    const publicJwk: JWK = { kty: jwk.kty, n: jwk.n, e: jwk.e, kid: row.id, use: "sig", alg: row.alg };
    const activeUntil = new Date(row.active_until);
    let privateKey: CryptoKey | undefined;
    if (activeUntil.getTime() > now) {
      let opened: string;
      try {
        opened = unseal(this.masterKey, row.private_key, sealContext(row.instance_id, row.id));
      } catch {
        throw new Error(
          `PLATFORM_MASTERKEY: cannot decrypt signing key ${row.id} of instance ${row.instance_id} (is it the key it was created with?)`,
        );
      }
      privateKey = (await importJWK(JSON.parse(opened), row.alg)) as CryptoKey;
    }
    return {
      kid: row.id,
      alg: row.alg,
      publicJwk,
      publicKey: (await importJWK(publicJwk, row.alg)) as CryptoKey,
      privateKey,
      createdAt: new Date(row.created_at),
      activeFrom: new Date(row.active_from),
      activeUntil,
      publishUntil: new Date(row.publish_until),
    };
  }
}

/** The additional authenticated data of a sealed private key: it opens only in its own row. */
function sealContext(instanceId: string, kid: string): string {
  return `oidc_signing_keys/${instanceId}/${kid}`;
}

/** Serializes key creation per instance across processes (held until the transaction ends). */
async function lockInstanceKeys(tx: Queryable, instanceId: string): Promise<void> {
  await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`oidc_signing_keys:${instanceId}`]);
}

function pickActive(keys: SigningKey[], now: number): SigningKey | undefined {
  let best: SigningKey | undefined;
  for (const k of keys) {
    if (k.activeFrom.getTime() <= now && now < k.activeUntil.getTime()) {
      if (!best || k.activeFrom > best.activeFrom) best = k;
    }
  }
  return best;
}

function pickActiveRow(rows: KeyRow[], now: number): KeyRow | undefined {
  let best: KeyRow | undefined;
  for (const r of rows) {
    const from = new Date(r.active_from).getTime();
    if (from <= now && now < new Date(r.active_until).getTime()) {
      if (!best || from > new Date(best.active_from).getTime()) best = r;
    }
  }
  return best;
}

function hasNext(keys: SigningKey[], current: SigningKey): boolean {
  return keys.some((k) => k !== current && k.activeFrom.getTime() >= current.activeUntil.getTime() - 1000);
}
