import { promises as dns } from "node:dns";
import { BlockList, isIP } from "node:net";
import { FailedPreconditionError } from "../../errors.ts";

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
   * Fetch challenges from loopback, private and link-local addresses too (default false: a domain that
   * resolves there is not fetched, so `_validate` cannot be used to probe the server's own network).
   */
  allowPrivateAddresses?: boolean;
  /** Address lookup (default: node:dns). */
  lookup?: (host: string) => Promise<string[]>;
}

/** Addresses a validation request must not reach unless allowPrivateAddresses is set. */
const privateRanges = new BlockList();
for (const [network, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.168.0.0", 16],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  privateRanges.addSubnet(network, prefix, "ipv4");
}
for (const [network, prefix] of [
  ["::", 127],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
] as const) {
  privateRanges.addSubnet(network, prefix, "ipv6");
}

/** True for loopback, private, link-local, multicast and reserved addresses (IPv4-mapped IPv6 included). */
export function isPrivateAddress(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return privateRanges.check(mapped[1], "ipv4");
  const family = isIP(address);
  if (family === 0) return true;
  return privateRanges.check(address, family === 4 ? "ipv4" : "ipv6");
}

async function defaultLookup(host: string): Promise<string[]> {
  return (await dns.lookup(host, { all: true })).map((entry) => entry.address);
}

/** The real verifier: an HTTP(S) file or a DNS TXT record. */
export class NetworkDomainVerifier implements DomainVerifier {
  constructor(private readonly options: NetworkDomainVerifierOptions = {}) {}

  async verify(method: DomainValidationMethod, domain: string, token: string): Promise<void> {
    if (method === "http") return this.http(domain, token);
    return this.dns(domain, token);
  }

  private async http(domain: string, token: string): Promise<void> {
    const origins = this.options.httpOrigins?.(domain) ?? [`https://${domain}`, `http://${domain}`];
    const problems: string[] = [];
    for (const origin of origins) {
      const url = `${origin}${CHALLENGE_PATH}${encodeURIComponent(token)}.txt`;
      try {
        if (!this.options.allowPrivateAddresses) {
          const host = new URL(origin).hostname.replace(/^\[|\]$/g, "");
          const lookup = this.options.lookup ?? defaultLookup;
          const addresses = isIP(host) ? [host] : await lookup(host);
          if (addresses.length === 0 || addresses.some(isPrivateAddress)) {
            problems.push(`${url} is not fetched: ${host} resolves to a private or reserved address`);
            continue;
          }
        }
        const response = await fetch(url, {
          // A redirect could lead to an address the check above did not see.
          redirect: "manual",
          signal: AbortSignal.timeout(this.options.timeoutMs ?? 5_000),
        });
        const text = (await response.text()).slice(0, 10_000).trim();
        if (response.ok && text === token) return;
        problems.push(
          response.ok ? `${url} does not contain the validation token` : `${url} answered ${response.status}`,
        );
      } catch (error) {
        problems.push(`${url} could not be fetched (${(error as Error).message})`);
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
