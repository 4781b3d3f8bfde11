import type { JWK } from "jose";
import { seal, unseal } from "../crypto/masterkey.ts";
import {
  activateWebKey,
  addWebKey,
  lockInstanceKeys,
  removeWebKey,
  signingRow,
  type WebKeyRow,
} from "../domain/web-key/commands.ts";
import { DEFAULT_WEB_KEY_CONFIG, WEB_KEY, type WebKeyConfig } from "../domain/web-key/events.ts";
import { outsideCall } from "../eventstore/claim.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import type { NewEvent, StoredEvent } from "../eventstore/types.ts";
import { newId } from "../id.ts";
import type { Database, Queryable } from "../storage/database.ts";
import { generateWebKey } from "./key-generation.ts";

/** Lifetimes of signing keys (a key signs for at most 6 h and stays published for 30 h in all). */
export interface KeyPolicy {
  /** How long a key signs. */
  signForMs: number;
  /** How long after it stops signing a key stays published (longer than any token it signed lives). */
  publishAfterMs: number;
  /** How early the next key is created and published before it starts signing (≫ the JWKS max-age). */
  prepublishMs: number;
  /** How long a process reuses the keys it read (the bound should another process's notification be lost). */
  cacheMs: number;
}

export const defaultKeyPolicy: KeyPolicy = {
  signForMs: 6 * 3600_000,
  publishAfterMs: 24 * 3600_000,
  prepublishMs: 3600_000,
  cacheMs: 5_000,
};

/** What a change answers: the key's version after it. */
export interface KeyVersion {
  id: string;
  sequence: number;
  changeDate: Date;
}

/** A published key as stored: its row and its sealed private key (null when erased). */
export interface StoredKey {
  row: WebKeyRow & { publicJwk: JWK };
  sealed: string | null;
}

interface KeyRow {
  instance_id: string;
  id: string;
  alg: string;
  config: WebKeyConfig | string;
  public_jwk: JWK | string;
  private_key: string | null;
  created_at: Date;
  changed_at: Date;
  sequence: number | string;
  active_from: Date | null;
  active_until: Date | null;
  publish_until: Date | null;
  [key: string]: unknown;
}

/** The published keys of an instance with their sealed private keys (null when erased). */
const SELECT_KEYS = `SELECT k.instance_id, k.id, k.alg, k.config, k.public_jwk, s.private_key, k.created_at, k.changed_at,
    k.sequence, k.active_from, k.active_until, k.publish_until
  FROM oidc_signing_keys k
  LEFT JOIN oidc_signing_key_secrets s ON s.instance_id = k.instance_id AND s.id = k.id
  WHERE k.instance_id = $1 AND (k.publish_until IS NULL OR k.publish_until > now())`;

/**
 * The stored side of the signing keys: reads them, and makes every change as events of the key
 * (src/domain/web-key) with the private key sealed under the master key beside them. Changes of an
 * instance's keys hold its key lock, so two processes never create two successors.
 */
export class KeyStore {
  constructor(
    private readonly db: Database,
    private readonly masterKey: Buffer,
    private readonly eventStore: EventStore,
    readonly policy: KeyPolicy,
  ) {}

  /** The published keys of an instance. */
  async published(instanceId: string, q: Queryable = this.db): Promise<StoredKey[]> {
    return (await q.query<KeyRow>(SELECT_KEYS, [instanceId])).map((raw) => ({
      row: toRow(raw),
      sealed: raw.private_key,
    }));
  }

  /** The private JWK of a key (throws naming PLATFORM_MASTERKEY when it does not open). */
  openPrivateKey(instanceId: string, kid: string, sealed: string): JWK {
    try {
      return JSON.parse(unseal(this.masterKey, sealed, sealContext(instanceId, kid)));
    } catch {
      throw new Error(
        `PLATFORM_MASTERKEY: cannot decrypt signing key ${kid} of instance ${instanceId} (is it the key it was created with?)`,
      );
    }
  }

  /** Creates the key the automatic rotation needs now, if any (see `keyDue`). True when it looked. */
  async ensureSigningKey(instanceId: string, keys: StoredKey[]): Promise<boolean> {
    const due = await this.keyDue(this.db, instanceId, keys);
    if (due) await this.createScheduled(instanceId, due.config);
    return due !== undefined;
  }

  /** A new key of `config`, published at once, not signing (the web keys API's CreateWebKey). */
  async create(instanceId: string, config: WebKeyConfig, creator: string): Promise<KeyVersion> {
    const kid = newId();
    const generated = await generateWebKey(config, kid);
    const stored = await this.eventStore.push({ instanceId, creator }, async (tx) => [
      await addWebKey(tx, instanceId, kid, this.sealKey(instanceId, kid, generated.privateJwk), {
        alg: generated.alg,
        config,
        public_jwk: generated.publicJwk as Record<string, unknown>,
      }),
    ]);
    return versionOf(stored, kid);
  }

  /** Makes a published key the one that signs from now on (ActivateWebKey; see `activateWebKey`). */
  async activate(instanceId: string, kid: string, creator: string): Promise<KeyVersion> {
    const stored = await this.eventStore.push({ instanceId, creator }, async (tx) => {
      await lockInstanceKeys(tx, instanceId);
      await tx.expect(WEB_KEY, kid);
      const rows = (await this.published(instanceId, tx)).map((k) => k.row);
      return activateWebKey(tx, instanceId, rows, kid, new Date(), this.policy);
    });
    if (stored.some((e) => e.aggregateId === kid)) return versionOf(stored, kid);
    // it signed already: nothing changed
    const row = (await this.published(instanceId)).find((k) => k.row.id === kid)!.row;
    return { id: kid, sequence: row.sequence, changeDate: row.changedAt };
  }

  /** Deletes a key that does not sign, with its private key (DeleteWebKey). */
  async remove(instanceId: string, kid: string, creator: string): Promise<KeyVersion> {
    const stored = await this.eventStore.push({ instanceId, creator }, async (tx) => {
      await lockInstanceKeys(tx, instanceId);
      await tx.expect(WEB_KEY, kid);
      const rows = (await this.published(instanceId, tx)).map((k) => k.row);
      return [await removeWebKey(tx, instanceId, rows, kid, Date.now())];
    });
    return versionOf(stored, kid);
  }

  /** Creates a key of the active key's configuration and activates it, in one step; returns its kid. */
  async rotate(instanceId: string): Promise<string> {
    const config = await continuationConfig(this.db, instanceId);
    const kid = newId();
    const generated = await generateWebKey(config, kid);
    await this.eventStore.push({ instanceId, creator: "system" }, async (tx) => {
      await lockInstanceKeys(tx, instanceId);
      const added = await addWebKey(
        tx,
        instanceId,
        kid,
        this.sealKey(instanceId, kid, generated.privateJwk),
        {
          alg: generated.alg,
          config,
          public_jwk: generated.publicJwk as Record<string, unknown>,
        },
      );
      const rows: WebKeyRow[] = (await this.published(instanceId, tx)).map((k) => k.row);
      const now = new Date();
      // the new key's row appears with the append: decide as if it were there
      rows.push({ id: kid, alg: generated.alg, config, sequence: 1, createdAt: now, changedAt: now });
      return [added, ...(await activateWebKey(tx, instanceId, rows, kid, now, this.policy))];
    });
    return kid;
  }

  /** Throws when a stored key does not open with the master key (a wrong PLATFORM_MASTERKEY). */
  async checkMasterKey(): Promise<void> {
    const rows = await this.db.query<{ instance_id: string; id: string; private_key: string }>(
      "SELECT instance_id, id, private_key FROM oidc_signing_key_secrets ORDER BY id DESC LIMIT 1",
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

  private sealKey(instanceId: string, kid: string, privateJwk: JWK): string {
    return seal(this.masterKey, JSON.stringify(privateJwk), sealContext(instanceId, kid));
  }

  /**
   * The key the automatic rotation must create now, if any: one signing at once when no key signs (of the
   * configuration signed with last), or the successor of the key that signs when it ends within
   * `prepublishMs` and none follows (of its configuration). Only keys whose private key is stored count.
   */
  private async keyDue(
    q: Queryable,
    instanceId: string,
    keys: StoredKey[],
  ): Promise<{ from: Date; config: WebKeyConfig } | undefined> {
    const now = Date.now();
    const rows = keys.filter((k) => k.sealed !== null).map((k) => k.row);
    const active = signingRow(rows, now);
    if (!active) return { from: new Date(now), config: await continuationConfig(q, instanceId) };
    const until = active.activeUntil!.getTime();
    if (until - now >= this.policy.prepublishMs) return undefined;
    if (rows.some((r) => r.activeFrom && r.activeFrom.getTime() >= until - 1000)) return undefined;
    return { from: active.activeUntil!, config: active.config };
  }

  /**
   * Creates the key `keyDue` asks for, generated before the transaction (an RSA key takes a while) and
   * added only if it is still due under the instance's key lock: of processes racing, one adds it.
   * Automatic: it never carries the idempotency key of the call it happens in.
   */
  private async createScheduled(instanceId: string, config: WebKeyConfig): Promise<void> {
    const kid = newId();
    const generated = await generateWebKey(config, kid);
    await outsideCall(() =>
      this.eventStore.push({ instanceId, creator: "system" }, async (tx): Promise<NewEvent[]> => {
        await lockInstanceKeys(tx, instanceId);
        const due = await this.keyDue(tx, instanceId, await this.published(instanceId, tx));
        if (!due || JSON.stringify(due.config) !== JSON.stringify(config)) return [];
        const activeUntil = new Date(due.from.getTime() + this.policy.signForMs);
        const sealed = this.sealKey(instanceId, kid, generated.privateJwk);
        return [
          await addWebKey(tx, instanceId, kid, sealed, {
            alg: generated.alg,
            config,
            public_jwk: generated.publicJwk as Record<string, unknown>,
            active_from: due.from.toISOString(),
            active_until: activeUntil.toISOString(),
            publish_until: new Date(activeUntil.getTime() + this.policy.publishAfterMs).toISOString(),
            automatic: true,
          }),
        ];
      }),
    );
  }
}

/**
 * The additional authenticated data of a sealed private key: it opens only for its own instance and kid
 * (named after the table the keys were first kept in).
 */
function sealContext(instanceId: string, kid: string): string {
  return `oidc_signing_keys/${instanceId}/${kid}`;
}

/** The configuration new keys continue with: of the key that started signing last, else the default. */
async function continuationConfig(q: Queryable, instanceId: string): Promise<WebKeyConfig> {
  const rows = await q.query<{ config: WebKeyConfig | string }>(
    `SELECT config FROM oidc_signing_keys WHERE instance_id = $1 AND active_from IS NOT NULL AND active_from <= now()
     ORDER BY active_from DESC LIMIT 1`,
    [instanceId],
  );
  return rows[0] ? parseJson<WebKeyConfig>(rows[0].config) : DEFAULT_WEB_KEY_CONFIG;
}

function parseJson<T>(value: T | string): T {
  return typeof value === "string" ? (JSON.parse(value) as T) : value;
}

function date(value: Date | string | null): Date | undefined {
  return value === null ? undefined : new Date(value);
}

function toRow(row: KeyRow): WebKeyRow & { publicJwk: JWK } {
  return {
    id: row.id,
    alg: row.alg,
    config: parseJson(row.config),
    publicJwk: parseJson(row.public_jwk),
    activeFrom: date(row.active_from),
    activeUntil: date(row.active_until),
    publishUntil: date(row.publish_until),
    createdAt: new Date(row.created_at),
    changedAt: new Date(row.changed_at),
    sequence: Number(row.sequence),
  };
}

function versionOf(stored: StoredEvent[], kid: string): KeyVersion {
  const last = stored.filter((e) => e.aggregateId === kid).at(-1);
  if (!last) throw new Error(`no event of web key ${kid}`);
  return { id: kid, sequence: last.sequence, changeDate: last.createdAt };
}
