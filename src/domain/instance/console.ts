/**
 * The administration console's OpenID Connect app (docs/console.md): a first-party public client (PKCE, no
 * secret) named "Console" in the instance's management project. Every instance gets it at setup; an
 * instance made before the console existed gets it at the next start (`ensureConsoleApp`). Which app it is
 * is recorded on the instance (`instance.console.set`), so renaming the app changes nothing; an app that was
 * removed is made again at the next start.
 */
import type { EventStore } from "../../eventstore/eventstore.ts";
import type { CommandTx, NewEvent } from "../../eventstore/types.ts";
import { newId } from "../../id.ts";
import {
  OidcAppType,
  OidcAuthMethod,
  type OidcConfig,
  OidcGrantType,
  OidcResponseType,
  OidcTokenType,
  PROJECT,
  ProjectEvent,
} from "../project/events.ts";
import { isLoopbackHost } from "../project/oidc.ts";
import { INSTANCE, type InstanceConsoleSetPayload, InstanceEvent } from "./events.ts";

export const CONSOLE_APP_NAME = "Console";
/** Where the console is served, below the instance's origin. */
export const CONSOLE_PATH = "/ui/console";

/**
 * The console app's configuration for the instance reached at `origin` (`<scheme>://<host>[:port]`): the
 * exact redirect URI `<origin>/ui/console/callback`, the post-logout redirect `<origin>/ui/console/`, the
 * code flow with refresh tokens, no client authentication (PKCE). Dev mode, as for any app, only when the
 * origin is http on a host other than a loopback one.
 */
export function consoleAppConfig(origin: string): OidcConfig {
  const url = new URL(origin);
  return {
    redirect_uris: [`${origin}${CONSOLE_PATH}/callback`],
    post_logout_redirect_uris: [`${origin}${CONSOLE_PATH}/`],
    response_types: [OidcResponseType.code],
    grant_types: [OidcGrantType.authorizationCode, OidcGrantType.refreshToken],
    app_type: OidcAppType.userAgent,
    auth_method: OidcAuthMethod.none,
    access_token_type: OidcTokenType.bearer,
    access_token_role_assertion: false,
    id_token_role_assertion: false,
    id_token_userinfo_assertion: true,
    dev_mode: url.protocol === "http:" && !isLoopbackHost(url.hostname),
    clock_skew_ns: 0,
  };
}

/** The events that add the console app to the management project and record it on the instance. */
export function consoleAppEvents(
  instanceId: string,
  project: { id: string; orgId: string },
  origin: string,
): { appId: string; clientId: string; events: NewEvent[] } {
  const appId = newId();
  const clientId = `${newId()}@console`;
  const payload: InstanceConsoleSetPayload = { app_id: appId, client_id: clientId };
  return {
    appId,
    clientId,
    events: [
      {
        aggregateType: PROJECT,
        aggregateId: project.id,
        resourceOwner: project.orgId,
        instanceId,
        type: ProjectEvent.oidcAppAdded,
        payload: {
          app_id: appId,
          name: CONSOLE_APP_NAME,
          client_id: clientId,
          config: consoleAppConfig(origin),
        },
      },
      {
        aggregateType: INSTANCE,
        aggregateId: instanceId,
        resourceOwner: instanceId,
        instanceId,
        type: InstanceEvent.consoleSet,
        payload: { ...payload },
      },
    ],
  };
}

/** The console app the instance's events name (the last `instance.console.set`), or undefined. */
export function consoleAppOf(
  events: readonly { type: string; payload: unknown }[],
): InstanceConsoleSetPayload | undefined {
  let found: InstanceConsoleSetPayload | undefined;
  for (const event of events)
    if (event.type === InstanceEvent.consoleSet) found = event.payload as InstanceConsoleSetPayload;
    else if (event.type === InstanceEvent.removed) found = undefined;
  return found;
}

/**
 * Gives the instance its console app unless it has one whose app still exists: the app and
 * `instance.console.set` in one push, under the instance's and the project's optimistic locks, so processes
 * starting together add it once. Answers whether it added one.
 */
export async function ensureConsoleApp(
  eventStore: EventStore,
  instanceId: string,
  origin: string,
): Promise<boolean> {
  const stored = await eventStore.push({ instanceId, creator: "system" }, async (tx: CommandTx) => {
    const instanceEvents = await tx.load(INSTANCE, instanceId, instanceId);
    if (instanceEvents.length === 0 || instanceEvents.some((e) => e.type === InstanceEvent.removed))
      return [];
    const current = consoleAppOf(instanceEvents);
    const rows = await tx.query<{ iam_project_id: string | null; org_id: string | null }>(
      `SELECT i.iam_project_id, p.org_id FROM instances i
       LEFT JOIN projects p ON p.instance_id = i.id AND p.id = i.iam_project_id WHERE i.id = $1`,
      [instanceId],
    );
    const projectId = rows[0]?.iam_project_id;
    const orgId = rows[0]?.org_id;
    if (!projectId || !orgId) return []; // no management project: nothing to add the app to
    if (current && (await findApp(tx, instanceId, current.app_id))) return [];
    await tx.expect(PROJECT, projectId, instanceId);
    return consoleAppEvents(instanceId, { id: projectId, orgId }, origin).events;
  });
  return stored.length > 0;
}

async function findApp(tx: CommandTx, instanceId: string, appId: string): Promise<boolean> {
  const rows = await tx.query("SELECT 1 FROM apps WHERE instance_id = $1 AND id = $2", [instanceId, appId]);
  return rows.length > 0;
}
