/**
 * Redirect URI rules of the authorization and end-session endpoints. A requested redirect URI must equal a
 * registered one exactly (character for character: no normalization, no prefix matching), with one
 * exception for native apps (RFC 8252 §7.3): a loopback redirect URI (`http://127.0.0.1`, `http://[::1]`,
 * `http://localhost`) matches a registered one whatever its port, because the operating system hands the
 * app a free port at run time. Everything but the port (scheme, host, path, query) must still be equal.
 */
import type { OidcClient } from "./clients.ts";

/** Longest redirect URI accepted (the apps API registers at most 2048 characters). */
export const MAX_REDIRECT_URI = 2048;

/** `http://<loopback host>[:port]<rest>`: the host and the rest, without the port. */
const LOOPBACK = /^http:\/\/(127\.0\.0\.1|\[::1\]|localhost)(?::(\d{1,5}))?([/?].*)?$/i;

function withoutLoopbackPort(uri: string): string | undefined {
  const match = LOOPBACK.exec(uri);
  if (!match) return undefined;
  return `http://${match[1].toLowerCase()}${match[3] ?? ""}`;
}

/**
 * A usable redirect URI: absolute, parseable, no fragment (RFC 6749 §3.1.2), at most MAX_REDIRECT_URI
 * characters. Answers the reason when it is not (a redirect to it is never made then).
 */
export function malformedRedirectUri(uri: string): string | undefined {
  if (uri.length > MAX_REDIRECT_URI) return `longer than ${MAX_REDIRECT_URI} characters`;
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return "not an absolute URI";
  }
  if (uri.includes("#") || url.hash) return "it contains a fragment";
  return undefined;
}

/** Whether `uri` is one of the client's registered redirect URIs (see the module comment). */
export function isRegisteredRedirectUri(client: OidcClient, uri: string): boolean {
  if (client.redirectUris.includes(uri)) return true;
  if (client.appType !== "native") return false;
  const requested = withoutLoopbackPort(uri);
  if (requested === undefined) return false;
  return client.redirectUris.some((registered) => withoutLoopbackPort(registered) === requested);
}

/** Whether `uri` is one of the client's post-logout redirect URIs: exactly (character for character). */
export function isRegisteredPostLogoutUri(client: OidcClient, uri: string): boolean {
  return client.postLogoutRedirectUris.includes(uri);
}
