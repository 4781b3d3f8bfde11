import { type CryptoKey, importJWK, type JWK } from "jose";
import { INSTANCE, InstanceEvent } from "../domain/instance/events.ts";
import { isPublished, signingRow, type WebKeyRow, webKeyState } from "../domain/web-key/commands.ts";
import { WEB_KEY, type WebKeyConfig, type WebKeyState } from "../domain/web-key/events.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import type { Database } from "../storage/database.ts";
import { publicJwkOf } from "./key-generation.ts";
import { defaultKeyPolicy, type KeyPolicy, KeyStore, type KeyVersion, type StoredKey } from "./key-store.ts";

export { defaultKeyPolicy, type KeyPolicy, type KeyVersion };

export interface SigningKey extends WebKeyRow {
  kid: string;
  /** The public JWK as published (`kid`, `use`, `alg`, public parts only). */
  publicJwk: JWK;
  publicKey: CryptoKey;
  /** Keys scheduled to sign (a window not over yet) whose private key opens; others have none. */
  privateKey?: CryptoKey;
}

/** What the web keys API lists: a key and its state now. */
export interface ListedKey {
  key: SigningKey;
  state: WebKeyState;
}

interface InstanceKeys {
  /** Published keys, newest first. */
  keys: SigningKey[];
  /** The JWKS document, serialized once. */
  jwks: Buffer;
  loadedAt: number;
}

interface Material {
  publicKey: CryptoKey;
  privateKey?: CryptoKey;
}

/**
 * The signing keys of every instance ("web keys"), as the OIDC provider uses them: the key that signs, the
 * key set, the keys that verify, cached per process. The stored side and every change are `KeyStore`'s
 * (./key-store.ts): events of the key, the private key sealed with the master key.
 *
 * The database decides which key signs: the newest whose [active_from, active_until) holds the current time,
 * so every process on one database signs with the same key (up to its cache age). The next key, of the
 * active key's configuration, is created `prepublishMs` before the current one stops signing and published
 * at once, so clients that cache the JWKS know it before it signs.
 */
export class SigningKeys {
  private readonly store: KeyStore;
  private readonly cache = new Map<string, Promise<InstanceKeys>>();
  /** The settled entries of `cache` (the hot paths skip a promise hop). */
  private readonly loaded = new Map<string, InstanceKeys>();
  /** When a verification missed a kid: reloads for unknown kids are rate-limited per instance. */
  private readonly lastMissReload = new Map<string, number>();
  /** Imported keys by `<instance>/<kid>` (a key's material never changes): re-reads only query rows. */
  private readonly material = new Map<string, Promise<Material>>();

  constructor(
    db: Database,
    masterKey: Buffer,
    eventStore: EventStore,
    readonly policy: KeyPolicy = defaultKeyPolicy,
  ) {
    this.store = new KeyStore(db, masterKey, eventStore, policy);
    eventStore.onCommitted((events) => {
      for (const e of events) {
        if (e.aggregateType === WEB_KEY) this.forget(e.instanceId);
        else if (e.aggregateType === INSTANCE && e.type === InstanceEvent.removed) this.forget(e.aggregateId);
      }
    });
    eventStore.onStale(() => this.invalidate());
  }

  /** The key that signs now (created when the instance has none yet). */
  async active(instanceId: string): Promise<SigningKey> {
    const entry = this.load(instanceId);
    const loaded = await entry;
    const now = Date.now();
    let key = signingKey(loaded.keys, now);
    const successorDue =
      key !== undefined &&
      key.activeUntil!.getTime() - now < this.policy.prepublishMs &&
      !hasNext(loaded.keys, key) &&
      now - loaded.loadedAt > Math.min(5_000, this.policy.cacheMs);
    if (!key || successorDue) {
      // The cached view is stale, or the next key is due: read again (creating keys as needed). Concurrent
      // callers share one reload: only the first replaces the entry they all saw.
      const reloaded = await this.reload(instanceId, entry);
      key = signingKey(reloaded.keys, Date.now()) ?? key;
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

  /**
   * The algorithms of the published keys, the active key's first: what ID tokens are (and may soon be)
   * signed with (`id_token_signing_alg_values_supported`).
   */
  async algorithms(instanceId: string): Promise<string[]> {
    const { keys } = await this.load(instanceId);
    const active = signingKey(keys, Date.now());
    return [...new Set([...(active ? [active.alg] : []), ...keys.map((k) => k.alg)])];
  }

  /** A published key by kid, for verifying tokens this instance signed (undefined: unknown kid). */
  async verificationKey(instanceId: string, kid: string): Promise<SigningKey | undefined> {
    const found = (await this.load(instanceId)).keys.find((k) => k.kid === kid);
    if (found) return isPublished(found, Date.now()) ? found : undefined;
    // Perhaps another process created it since we read: look again, at most once a second per instance.
    const last = this.lastMissReload.get(instanceId) ?? 0;
    if (Date.now() - last < 1000) return undefined;
    this.lastMissReload.set(instanceId, Date.now());
    const reloaded = await this.reload(instanceId, this.load(instanceId));
    return reloaded.keys.find((k) => k.kid === kid);
  }

  /** The published keys with their states: the active one first, then the others newest first. */
  async list(instanceId: string): Promise<ListedKey[]> {
    const { keys } = await this.reload(instanceId, this.load(instanceId));
    const now = Date.now();
    const active = signingKey(keys, now);
    const listed = keys.map((key) => ({ key, state: webKeyState(key, active, now) }));
    return [...listed.filter((l) => l.key === active), ...listed.filter((l) => l.key !== active)];
  }

  /** A new key of `config`, published at once, not signing (CreateWebKey). */
  create(instanceId: string, config: WebKeyConfig, creator: string): Promise<KeyVersion> {
    return this.store.create(instanceId, config, creator);
  }

  /** Makes a published key the one that signs from now on (ActivateWebKey). */
  activate(instanceId: string, kid: string, creator: string): Promise<KeyVersion> {
    return this.store.activate(instanceId, kid, creator);
  }

  /** Deletes a key that does not sign, with its private key (DeleteWebKey). */
  remove(instanceId: string, kid: string, creator: string): Promise<KeyVersion> {
    return this.store.remove(instanceId, kid, creator);
  }

  /**
   * Rotates on demand (`platform keys rotate`): a new key of the active key's configuration signs from now
   * on; the key signing until now stops signing but stays published until its publish_until (longer than
   * any token it signed lives); keys prepared for later are dropped.
   */
  async rotate(instanceId: string): Promise<SigningKey> {
    const kid = await this.store.rotate(instanceId);
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
  checkMasterKey(): Promise<void> {
    return this.store.checkMasterKey();
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
    let stored = await this.store.published(instanceId);
    if (await this.store.ensureSigningKey(instanceId, stored))
      stored = await this.store.published(instanceId);
    const now = Date.now();
    stored.sort(
      (a, b) => b.row.createdAt.getTime() - a.row.createdAt.getTime() || (a.row.id < b.row.id ? 1 : -1),
    );
    const keys = await Promise.all(stored.map((k) => this.toKey(instanceId, k, now)));
    const present = new Set(keys.map((k) => `${instanceId}/${k.kid}`));
    for (const id of this.material.keys())
      if (id.startsWith(`${instanceId}/`) && !present.has(id)) this.material.delete(id);
    const jwks = Buffer.from(JSON.stringify({ keys: keys.map((k) => k.publicJwk) }));
    return { keys, jwks, loadedAt: now };
  }

  private async toKey(instanceId: string, { row, sealed }: StoredKey, now: number): Promise<SigningKey> {
    const publicJwk = publicJwkOf(row.publicJwk, row.id, row.alg);
    // Private keys are opened for keys scheduled to sign (a window not over yet) only.
    const mayStillSign = row.activeUntil !== undefined && row.activeUntil.getTime() > now && sealed !== null;
    const id = `${instanceId}/${row.id}`;
    let material = this.material.get(id);
    if (!material || (mayStillSign && !(await material).privateKey)) {
      material = this.importKey(instanceId, row, publicJwk, mayStillSign ? sealed : null);
      this.material.set(id, material);
      material.catch(() => this.material.delete(id));
    }
    const { publicKey, privateKey } = await material;
    return { ...row, kid: row.id, publicJwk, publicKey, privateKey: mayStillSign ? privateKey : undefined };
  }

  private async importKey(
    instanceId: string,
    row: WebKeyRow,
    publicJwk: JWK,
    sealed: string | null,
  ): Promise<Material> {
    const privateKey =
      sealed === null
        ? undefined
        : ((await importJWK(this.store.openPrivateKey(instanceId, row.id, sealed), row.alg)) as CryptoKey);
    return { publicKey: (await importJWK(publicJwk, row.alg)) as CryptoKey, privateKey };
  }
}

/** The key that signs at `now` among loaded keys (it must have its private key). */
function signingKey(keys: SigningKey[], now: number): SigningKey | undefined {
  return signingRow(
    keys.filter((k) => k.privateKey !== undefined),
    now,
  );
}

function hasNext(keys: SigningKey[], current: SigningKey): boolean {
  return keys.some(
    (k) =>
      k !== current &&
      k.activeFrom !== undefined &&
      k.activeFrom.getTime() >= current.activeUntil!.getTime() - 1000,
  );
}
