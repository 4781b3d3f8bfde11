import type { TokenVerifier } from "../auth/authenticate.ts";
import type { Caller } from "../auth/caller.ts";
import { sha256 } from "../crypto/tokens.ts";
import { INSTANCE } from "../domain/instance/events.ts";
import { USER, UserEvent } from "../domain/user/events.ts";
import { WEB_KEY, WebKeyEvent } from "../domain/web-key/events.ts";
import { UnauthenticatedError } from "../errors.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import { activeAccessToken, isJwt } from "./access-tokens.ts";
import type { OidcContext } from "./context.ts";
import { actorsOf, parseHandle, type StoredAccessToken } from "./token-store.ts";

/**
 * How long a verified access token is reused for API calls: revocations drop it at once (other processes'
 * through their notification); this bounds its age should a notification be lost.
 */
const CACHE_MS = 2_000;
const CACHE_MAX = 10_000;

interface Entry {
  token: StoredAccessToken;
  until: number;
}

/**
 * Lets the management APIs accept this provider's access tokens (`Authenticator.addVerifier`): a token of
 * the request's instance, active, whose audience contains the instance's management project (scope
 * `urn:platform:iam:org:project:id:platform:aud`). The caller is the token's user. Verified tokens are
 * reused for CACHE_MS; revocations and user changes in this process drop them at once.
 */
export function accessTokenVerifier(ctx: OidcContext, eventStore: EventStore): TokenVerifier {
  const cache = new Map<string, Entry>();
  /** Instance → its management project (set once at instance setup). */
  const managementProjects = new Map<string, string>();
  /** Counts drops: a verification that ran across one is not cached (it may have read the token before). */
  let generation = 0;
  const drop = (match: (token: StoredAccessToken) => boolean) => {
    generation++;
    for (const [key, entry] of cache) if (match(entry.token)) cache.delete(key);
  };
  // Revocations include the end of browser sessions (./session-tokens.ts). An exchanged token (lineage)
  // depends on other tokens, sessions and users: any revocation or any change of one of its actors makes it
  // verify again.
  ctx.tokens.onRevoked((r) =>
    drop(
      (t) =>
        t.instanceId === r.instanceId &&
        ((r.tokenId !== undefined && t.id === r.tokenId) ||
          (r.familyId !== undefined && t.familyId === r.familyId) ||
          (t.sessionId != null && r.sessionIds?.includes(t.sessionId) === true) ||
          r.userIds?.includes(t.subject) === true ||
          !!t.lineage),
    ),
  );
  eventStore.onCommitted((events) => {
    for (const e of events) {
      if (e.aggregateType === USER)
        drop(
          (t) =>
            t.instanceId === e.instanceId &&
            (t.subject === e.aggregateId ||
              (!!t.lineage &&
                (e.type === UserEvent.patRemoved || actorsOf(t.lineage.act).includes(e.aggregateId)))),
        );
      // A JWT access token ends with its signing key.
      if (e.aggregateType === WEB_KEY && e.type === WebKeyEvent.removed)
        drop((t) => t.instanceId === e.instanceId && t.jwt);
      if (e.aggregateType === INSTANCE) {
        drop((t) => t.instanceId === e.aggregateId);
        managementProjects.delete(e.aggregateId);
      }
    }
  });
  eventStore.onStale(() => {
    drop(() => true);
    managementProjects.clear();
  });

  return async (value, instanceId): Promise<Caller | undefined> => {
    if (!instanceId) return undefined;
    if (!isJwt(value) && parseHandle(value)?.kind !== "at") return undefined;
    const key = `${instanceId}\u0000${sha256(value)}`;
    let token = cache.get(key)?.token;
    if (!token || cache.get(key)!.until <= Date.now() || token.expiresAt.getTime() <= Date.now()) {
      cache.delete(key);
      const before = generation;
      token = await activeAccessToken(ctx, instanceId, value);
      if (!token) return undefined;
      if (before === generation) {
        if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!);
        cache.set(key, { token, until: Date.now() + CACHE_MS });
      }
    }
    let project = managementProjects.get(instanceId);
    if (!project) {
      project = (await ctx.instances.byId(instanceId))?.iamProjectId;
      if (project) managementProjects.set(instanceId, project);
    }
    if (!project || !token.audience.includes(project)) {
      throw new UnauthenticatedError(
        "the access token's audience does not include the management project (scope urn:platform:iam:org:project:id:platform:aud)",
      );
    }
    return {
      kind: "user",
      userId: token.subject,
      instanceId,
      orgId: token.user!.orgId,
      via: "access_token",
      ...(token.sessionId ? { sessionId: token.sessionId } : {}),
    };
  };
}
