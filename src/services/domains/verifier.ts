import { promises as dns } from "node:dns";
import { isIP } from "node:net";
import { FailedPreconditionError } from "../../errors.ts";
import { DenyList } from "../../net/deny-list.ts";
import { type CallFailure, HttpCaller } from "../../net/http.ts";
import { type OutboundGuard, OutboundPolicy } from "../../net/outbound.ts";

export type DomainValidationMethod = "http" | "dns";

/**
 * Proves control of a domain by its validation token; throws FAILED_PRECONDITION saying why when the
 * proof is missing. Injectable (ServiceDeps.domainVerifier) so tests need no external address.
 */
export interface DomainVerifier {
  verify(method: DomainValidationMethod, domain: string, token: string): Promise<void>;
}

export const CHALLENGE_PATH = "/.well-known/platform-challenge/";
export const DNS_CHALLENGE_LABEL = "_platform-challenge";

export interface NetworkDomainVerifierOptions {
  /**
   * Origins to try for the HTTP challenge of a domain, in order (default: `https://<domain>`, then
   * `http://<domain>`). Tests point this at a local server.
   */
  httpOrigins?: (domain: string) => string[];
  /** TXT lookup (default: node:dns). */
  resolveTxt?: (name: string) => Promise<string[][]>;
  /** Timeout of one HTTP request or DNS lookup (default 5 s). */
  timeoutMs?: number;
  /**
   * Where the HTTP challenge may be fetched from: the outbound-address policy's guard (src/net/outbound.ts)
   * of the organization level, since organization owners validate domains (the platform passes it). Without
   * it, a guard that refuses loopback and private addresses too, unless `allowPrivateAddresses`.
   */
  outbound?: OutboundGuard;
  /** Without `outbound`: fetch challenges from loopback and private addresses too (tests). */
  allowPrivateAddresses?: boolean;
  /** Without `outbound`: address lookup in place of the system resolver (tests). */
  lookup?: (host: string) => Promise<string[]>;
}

/** Largest challenge answer read (the token is 32 characters). */
const MAX_CHALLENGE_BYTES = 64 * 1024;

/** The real verifier: an HTTP(S) file or a DNS TXT record. */
export class NetworkDomainVerifier implements DomainVerifier {
  private readonly caller: HttpCaller;

  constructor(private readonly options: NetworkDomainVerifierOptions = {}) {
    const { lookup } = options;
    const guard =
      options.outbound ??
      new OutboundPolicy({
        allowPrivate: options.allowPrivateAddresses ? "all" : "none",
        denyList: new DenyList([]),
        resolve: lookup
          ? async (host) => (await lookup(host)).map((address) => ({ address, family: isIP(address) }))
          : undefined,
      }).guard("organization");
    this.caller = new HttpCaller({
      guard,
      maxResponseBytes: MAX_CHALLENGE_BYTES,
      userAgent: "Platform-Domain-Validation/1",
      keepAlive: false,
    });
  }

  async verify(method: DomainValidationMethod, domain: string, token: string): Promise<void> {
    if (method === "http") return this.http(domain, token);
    return this.dns(domain, token);
  }

  /**
   * The HTTP challenge: never from an address the guard refuses (checked on every resolved address, the
   * connection made to the checked one), never following a redirect, so `_validate` cannot be used to
   * probe the server's own network.
   */
  private async http(domain: string, token: string): Promise<void> {
    const origins = this.options.httpOrigins?.(domain) ?? [`https://${domain}`, `http://${domain}`];
    const problems: string[] = [];
    for (const origin of origins) {
      const url = `${origin}${CHALLENGE_PATH}${encodeURIComponent(token)}.txt`;
      try {
        const answer = await this.caller.send("GET", url, undefined, {}, this.options.timeoutMs ?? 5_000);
        const ok = answer.status >= 200 && answer.status < 300;
        const text = answer.body.toString("utf8").trim();
        if (ok && text === token) return;
        problems.push(
          ok ? `${url} does not contain the validation token` : `${url} answered ${answer.status}`,
        );
      } catch (error) {
        const failure = error as CallFailure;
        problems.push(
          failure.kind === "denied"
            ? `${url} is not fetched: ${failure.message}`
            : `${url} could not be fetched (${failure.message})`,
        );
      }
    }
    throw new FailedPreconditionError(`domain validation failed: ${problems.join("; ")}`);
  }

  private async dns(domain: string, token: string): Promise<void> {
    const name = `${DNS_CHALLENGE_LABEL}.${domain}`;
    const resolveTxt = this.options.resolveTxt ?? ((n: string) => dns.resolveTxt(n));
    let records: string[][];
    try {
      records = await Promise.race([
        resolveTxt(name),
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error("timed out")), this.options.timeoutMs ?? 5_000).unref(),
        ),
      ]);
    } catch (error) {
      throw new FailedPreconditionError(
        `domain validation failed: no TXT record ${name} (${(error as Error).message})`,
      );
    }
    if (records.some((chunks) => chunks.join("") === token)) return;
    throw new FailedPreconditionError(
      `domain validation failed: no TXT record ${name} holds the validation token`,
    );
  }
}
