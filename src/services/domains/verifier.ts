import { promises as dns } from "node:dns";
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
        const response = await fetch(url, {
          redirect: "follow",
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
