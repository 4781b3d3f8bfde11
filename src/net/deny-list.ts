/**
 * The operator's own additions to the outbound-address policy (PLATFORM_EXECUTION_DENY_LIST, ./outbound.ts):
 * a comma-separated list of IP addresses, CIDR networks (`10.0.0.0/8`, `fc00::/7`) and host names
 * (`metadata.google.internal`, or `*.internal` for every name below a domain), closed to every outbound
 * connection. Host names are compared with the host as configured; addresses and networks with every
 * address the host resolves to, at connection time (the connection goes to exactly the addresses
 * checked), so a name that resolves to a denied address, now or after a DNS change, is refused too.
 * IPv4-mapped IPv6 addresses (`::ffff:127.0.0.1`) are checked as their IPv4 address.
 */
import { BlockList, isIP } from "node:net";
import { carriedIPv4Address, stripBrackets } from "./addresses.ts";

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

  /** Whether a resolved address is denied (an IPv6 address also by the IPv4 address it carries). */
  deniesAddress(address: string): boolean {
    const plain = stripBrackets(address).replace(/%.*$/, "");
    const family = isIP(plain);
    if (family === 0) return false;
    if (family === 4) return this.blocks.check(plain, "ipv4");
    if (this.blocks.check(plain, "ipv6")) return true;
    const carried = carriedIPv4Address(plain);
    return carried !== undefined && this.blocks.check(carried, "ipv4");
  }
}
