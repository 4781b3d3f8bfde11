/**
 * The WebAuthn relying party of a request (docs/factors.md "Passkeys and security keys"): the instance,
 * named by its name, with an RP ID that is one of its domains (default: the request's host without port),
 * and the origins the login serves under that ID: for each domain of the instance equal to the RP ID or
 * under it, `<scheme>://<domain>[:port]` as the issuer is built (PLATFORM_EXTERNAL_SECURE / _PORT; an
 * external port of 0 means the port the request used).
 */
import type { Config } from "../config.ts";
import type { RelyingParty } from "../domain/user/factors/webauthn.ts";
import { InvalidArgumentError } from "../errors.ts";
import { issuerFor } from "../oidc/issuer.ts";
import type { Queryable } from "../storage/database.ts";
import { hostWithoutPort } from "./instances.ts";

export async function relyingPartyOf(
  db: Queryable,
  config: Config,
  request: { instanceId: string; instanceName: string; host: string },
  domain?: string,
  field = "domain",
): Promise<RelyingParty> {
  const rpId = (domain || hostWithoutPort(request.host)).toLowerCase();
  const rows = await db.query<{ domain: string }>(
    "SELECT domain FROM instance_domains WHERE instance_id = $1 ORDER BY is_primary DESC, domain",
    [request.instanceId],
  );
  const domains = rows.map((r) => r.domain.toLowerCase());
  if (!domains.includes(rpId)) throw new InvalidArgumentError("must be a domain of the instance", field);
  const port = /:(\d+)$/.exec(request.host.trim())?.[0] ?? "";
  const origins = domains
    .filter((d) => d === rpId || d.endsWith(`.${rpId}`))
    .map((d) => issuerFor(config, `${d}${port}`));
  return { id: rpId, name: request.instanceName || rpId, origins };
}
