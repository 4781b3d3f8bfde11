/**
 * Where targets may not be called (PLATFORM_EXECUTION_DENY_LIST): a comma-separated list of IP addresses,
 * CIDR networks (`10.0.0.0/8`, `fc00::/7`) and host names (`metadata.google.internal`, or `*.internal` for
 * every name below a domain). Host names are compared with the URL's host; addresses and networks with the
 * address the host resolves to, at connection time (src/execution/http.ts connects to exactly the address
 * checked), so a name that resolves to a denied address, now or after a DNS change, is refused too.
 * IPv4-mapped IPv6 addresses (`::ffff:127.0.0.1`) are checked as their IPv4 address.
 */
import { BlockList, isIP } from "node:net";

/** The deny list docs/actions.md recommends for production: loopback, private, link-local (cloud metadata) and other internal ranges. */
export const RECOMMENDED_DENY_LIST = [
  "0.0.0.0/8",
  "10.0.0.0/8",
  "100.64.0.0/10",
  "127.0.0.0/8",
  "169.254.0.0/16",
  "172.16.0.0/12",
  "192.168.0.0/16",
  "::/128",
  "::1/128",
  "fc00::/7",
  "fe80::/10",
  "localhost",
  "metadata.google.internal",
];

export class DenyList {
  private readonly blocks = new BlockList();
  private readonly names = new Set<string>();
  private readonly suffixes: string[] = [];
  readonly empty: boolean;

  /** @throws Error naming the entry that is neither an address, a network nor a host name. */
  constructor(readonly entries: string[]) {
    for (const raw of entries) {
      const entry = raw.trim().toLowerCase();
      if (entry === "") continue;
      const slash = entry.indexOf("/");
      if (slash >= 0) {
        const address = entry.slice(0, slash);
        const bits = entry.slice(slash + 1);
        const family = isIP(address);
        const max = family === 4 ? 32 : 128;
        if (family === 0 || !/^\d{1,3}$/.test(bits) || Number(bits) > max)
          throw new Error(`"${raw}" is not a CIDR network`);
        this.blocks.addSubnet(address, Number(bits), family === 4 ? "ipv4" : "ipv6");
      } else if (isIP(stripBrackets(entry))) {
        const address = stripBrackets(entry);
        this.blocks.addAddress(address, isIP(address) === 4 ? "ipv4" : "ipv6");
      } else if (
        /^(\*\.)?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?$/.test(entry)
      ) {
        const name = entry.replace(/\.$/, "");
        if (name.startsWith("*.")) this.suffixes.push(name.slice(1));
        else this.names.add(name);
      } else {
        throw new Error(`"${raw}" is neither an IP address, a CIDR network nor a host name`);
      }
    }
    this.empty = this.names.size === 0 && this.suffixes.length === 0 && this.blocks.rules.length === 0;
  }

  /** A comma-separated list as configured. */
  static parse(value: string | undefined): DenyList {
    return new DenyList((value ?? "").split(",").filter((e) => e.trim() !== ""));
  }

  /** Whether the URL's host name is denied by name (an IP literal is checked as an address). */
  deniesHost(hostname: string): boolean {
    const host = stripBrackets(hostname.toLowerCase()).replace(/\.$/, "");
    if (isIP(host)) return this.deniesAddress(host);
    return this.names.has(host) || this.suffixes.some((s) => host.endsWith(s));
  }

  /** Whether a resolved address is denied. */
  deniesAddress(address: string): boolean {
    const family = isIP(address);
    if (family === 0) return false;
    if (family === 4) return this.blocks.check(address, "ipv4");
    if (this.blocks.check(address, "ipv6")) return true;
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
    return mapped !== undefined && this.blocks.check(mapped, "ipv4");
  }
}

function stripBrackets(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}
