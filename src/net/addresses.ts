/**
 * What kind of address an IP address is, for the outbound-address policy (./outbound.ts). Ranges are
 * matched on the address's bytes, never on its spelling, and IPv6 addresses that carry an IPv4 address
 * (IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::/96` and the
 * local-use `64:ff9b:1::/48`, 6to4 `2002::/16`) are judged by that IPv4 address too, because a connection
 * to them can end at it.
 */
import { isIP } from "node:net";

/**
 * - `public`: everything not listed below.
 * - `loopback`: 127.0.0.0/8, ::1.
 * - `private`: 10/8, 172.16/12, 192.168/16, 100.64/10 (carrier-grade NAT), 192.0.0.0/24 (IETF protocol
 *   assignments), 198.18/15 (benchmarking), fc00::/7 (unique local), fec0::/10 (site-local), 64:ff9b:1::/48
 *   (local-use NAT64).
 * - `link-local`: 169.254/16, fe80::/10.
 * - `metadata`: the cloud providers' instance metadata and platform endpoints: 169.254.169.254 and
 *   169.254.170.2 (AWS, GCP, Azure, OCI, …; link-local too), fd00:ec2::254 (AWS IPv6), 100.100.100.200
 *   (Alibaba Cloud), 168.63.129.16 (Azure's platform endpoint), 192.0.0.192 (Oracle Cloud Classic).
 * - `unspecified`: 0.0.0.0/8 (Linux connects 0.0.0.0 to the host itself), ::.
 * - `multicast`: 224/4, ff00::/8.
 * - `reserved`: 240/4 with the broadcast address 255.255.255.255, the deprecated IPv4-compatible IPv6
 *   addresses ::/96 (other than :: and ::1), the discard prefix 100::/64.
 */
export type AddressKind =
  | "public"
  | "loopback"
  | "private"
  | "link-local"
  | "metadata"
  | "unspecified"
  | "multicast"
  | "reserved";

/** Kinds no outbound connection ever reaches, whatever the configuration. */
export const ALWAYS_REFUSED: ReadonlySet<AddressKind> = new Set([
  "link-local",
  "metadata",
  "unspecified",
  "multicast",
  "reserved",
]);

/** The kinds the operator may open (PLATFORM_OUTBOUND_ALLOW_PRIVATE). */
export const PRIVATE_KINDS: ReadonlySet<AddressKind> = new Set(["loopback", "private"]);

/** How a refusal names the kind: "169.254.169.254 is a cloud metadata address". */
export const KIND_PHRASES: Record<AddressKind, string> = {
  public: "a public address",
  loopback: "a loopback address",
  private: "a private address",
  "link-local": "a link-local address",
  metadata: "a cloud metadata address",
  unspecified: "an unspecified address",
  multicast: "a multicast address",
  reserved: "a reserved or broadcast address",
};

interface Range {
  bytes: Uint8Array;
  prefix: number;
  kind: AddressKind;
}

function range(cidr: string, kind: AddressKind): Range {
  const [address, prefix] = cidr.split("/");
  const bytes = addressBytes(address);
  if (!bytes) throw new Error(`bad range ${cidr}`);
  return { bytes, prefix: Number(prefix ?? bytes.length * 8), kind };
}

/** Most specific first: the first range that matches decides. */
const IPV4_RANGES: Range[] = [
  range("169.254.169.254/32", "metadata"),
  range("169.254.170.2/32", "metadata"),
  range("100.100.100.200/32", "metadata"),
  range("168.63.129.16/32", "metadata"),
  range("192.0.0.192/32", "metadata"),
  range("0.0.0.0/8", "unspecified"),
  range("127.0.0.0/8", "loopback"),
  range("169.254.0.0/16", "link-local"),
  range("224.0.0.0/4", "multicast"),
  range("240.0.0.0/4", "reserved"),
  range("10.0.0.0/8", "private"),
  range("172.16.0.0/12", "private"),
  range("192.168.0.0/16", "private"),
  range("100.64.0.0/10", "private"),
  range("192.0.0.0/24", "private"),
  range("198.18.0.0/15", "private"),
];

const IPV6_RANGES: Range[] = [
  range("fd00:ec2::254/128", "metadata"),
  range("::/128", "unspecified"),
  range("::1/128", "loopback"),
  range("::/96", "reserved"),
  range("100::/64", "reserved"),
  range("fe80::/10", "link-local"),
  range("ff00::/8", "multicast"),
  range("fc00::/7", "private"),
  range("fec0::/10", "private"),
  range("64:ff9b:1::/48", "private"),
];

/** IPv6 prefixes whose addresses carry an IPv4 address, and where (byte offset). */
const EMBEDDING: { range: Range; offset: number }[] = [
  { range: range("::ffff:0:0/96", "public"), offset: 12 },
  { range: range("::ffff:0:0:0/96", "public"), offset: 12 },
  { range: range("64:ff9b::/96", "public"), offset: 12 },
  { range: range("64:ff9b:1::/48", "public"), offset: 12 },
  { range: range("2002::/16", "public"), offset: 2 },
];

/** Severity when an address has two readings (an IPv6 range and the IPv4 address it carries). */
const SEVERITY: AddressKind[] = [
  "public",
  "private",
  "loopback",
  "reserved",
  "multicast",
  "unspecified",
  "link-local",
  "metadata",
];

/** The kind of an IP address (IPv4 dotted quad or any IPv6 spelling, with or without a zone); undefined for anything else. */
export function addressKind(address: string): AddressKind | undefined {
  const bytes = addressBytes(address);
  if (!bytes) return undefined;
  if (bytes.length === 4) return match(bytes, IPV4_RANGES);
  let kind = match(bytes, IPV6_RANGES);
  const carried = carriedIPv4(bytes);
  if (carried) {
    const carriedKind = match(carried, IPV4_RANGES);
    if (SEVERITY.indexOf(carriedKind) > SEVERITY.indexOf(kind)) kind = carriedKind;
  }
  return kind;
}

/** The IPv4 address an IPv6 address carries (mapped, translated, NAT64, 6to4), as a dotted quad. */
export function carriedIPv4Address(address: string): string | undefined {
  const bytes = addressBytes(address);
  const carried = bytes?.length === 16 ? carriedIPv4(bytes) : undefined;
  return carried ? Array.from(carried).join(".") : undefined;
}

function carriedIPv4(bytes: Uint8Array): Uint8Array | undefined {
  for (const { range, offset } of EMBEDDING) {
    if (inRange(bytes, range)) return bytes.subarray(offset, offset + 4);
  }
  return undefined;
}

function match(bytes: Uint8Array, ranges: Range[]): AddressKind {
  for (const r of ranges) if (inRange(bytes, r)) return r.kind;
  return "public";
}

function inRange(bytes: Uint8Array, r: Range): boolean {
  if (bytes.length !== r.bytes.length) return false;
  let bits = r.prefix;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((bytes[i] & mask) !== (r.bytes[i] & mask)) return false;
  }
  return true;
}

/** Bytes of an IP address (4 or 16); undefined when it is not one. A `%zone` of IPv6 is ignored. */
export function addressBytes(address: string): Uint8Array | undefined {
  const text = stripBrackets(address);
  const family = isIP(text);
  if (family === 4) return Uint8Array.from(text.split(".").map(Number));
  if (family !== 6) return undefined;
  let v6 = text.toLowerCase();
  const zone = v6.indexOf("%");
  if (zone >= 0) v6 = v6.slice(0, zone);
  // a dotted IPv4 tail becomes two groups
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(v6);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number);
    v6 = `${v6.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = v6.includes("::") ? v6.split("::") : [v6, undefined];
  const groups = (part: string | undefined) => (part ? part.split(":") : []);
  const first = groups(head);
  const last = groups(tail);
  const all =
    tail === undefined ? first : [...first, ...Array(8 - first.length - last.length).fill("0"), ...last];
  const bytes = new Uint8Array(16);
  all.forEach((group, i) => {
    const value = Number.parseInt(group, 16);
    bytes[i * 2] = value >> 8;
    bytes[i * 2 + 1] = value & 0xff;
  });
  return bytes;
}

/** `[::1]` (a URL's IPv6 host) → `::1`. */
export function stripBrackets(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}
