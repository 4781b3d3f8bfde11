/** What the server tells the console about its instance (`/ui/console/config.json`, src/server/console.ts). */
export interface ConsoleConfig {
  /** The instance's OpenID Connect issuer, as the browser reaches it. */
  issuer: string;
  /** The client ID of the instance's "Console" app (a public client: PKCE, no secret). */
  clientId: string;
  /** Where the console is served (`/ui/console`). */
  basePath: string;
}

export async function loadConfig(): Promise<ConsoleConfig> {
  const response = await fetch("/ui/console/config.json", { credentials: "omit", cache: "no-store" });
  if (!response.ok) throw new Error(`config.json answered ${response.status}`);
  const body = (await response.json()) as { issuer: string; client_id: string; base_path: string };
  return { issuer: body.issuer, clientId: body.client_id, basePath: body.base_path };
}
