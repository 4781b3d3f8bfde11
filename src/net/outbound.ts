/**
 * The outbound-address policy: where the server may connect on behalf of what administrators configure
 * (action targets, identity providers, domain validation, notification providers). Every outbound
 * connection goes through an `OutboundGuard`, whose checks run where the address is decided:
 *
 * - `lookup` is the socket's lookup function (for `net.connect`, `tls.connect`, `http(s).request`): it
 *   resolves the name and refuses it when any of its addresses is refused, so the socket can only
 *   connect to addresses that were checked: a DNS answer that changes between a check and the
 *   connection (DNS rebinding) has nothing to change.
 * - `refusalOfHost` checks a host before connecting: IP literals (Node connects to them without a
 *   lookup) and the deny list's names. `connect` does both for any TCP or TLS connection, for clients
 *   that take a socket (e.g. nodemailer's `getSocket`); `lookup` alone suits clients that take a lookup
 *   function but connect themselves.
 *
 * The policy (docs/operations.md "Outbound connections"):
 * - always refused: link-local, cloud metadata, unspecified, multicast, reserved and broadcast addresses
 *   (./addresses.ts), whatever the configuration;
 * - loopback and private addresses: PLATFORM_OUTBOUND_ALLOW_PRIVATE decides per level: `instance`
 *   (default) allows them for what the instance configures (targets, the instance's identity providers,
 *   notification providers) and refuses them for what organizations configure (their identity
 *   providers, domain validation); `all` allows them everywhere, `none` nowhere;
 * - PLATFORM_EXECUTION_DENY_LIST: further addresses, networks and names, refused at every level.
 */
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import net from "node:net";
import tls from "node:tls";
import { ALWAYS_REFUSED, addressKind, KIND_PHRASES, PRIVATE_KINDS, stripBrackets } from "./addresses.ts";
import { DenyList } from "./deny-list.ts";

/**
 * Whether a server at `address` (the address a connection went to) is one of the host's or its networks'
 * own: a loopback or private address, or one that is not known. What such a server answers is not shown to
 * the API caller who configured the connection (only its status): it may be any service of the host,
 * another instance's API included, which an instance's administrator must not read through Platform
 * (docs/operations.md "Multi-tenant hosting").
 */
export function answerIsInternal(address: string | undefined): boolean {
  const kind = address === undefined ? undefined : addressKind(address);
  return kind === undefined || PRIVATE_KINDS.has(kind);
}

/** How a withheld answer is named in a message (see `answerIsInternal`). */
export const ANSWER_WITHHELD = "withheld: the provider's address is private";

/**
 * Who configured the destination: the instance (its administrators) or an organization below it
 * (an organization owner, who is trusted with less of the server's network).
 */
export type OutboundLevel = "instance" | "organization";

/** PLATFORM_OUTBOUND_ALLOW_PRIVATE: the levels that may reach loopback and private addresses. */
export const allowPrivateValues = ["none", "instance", "all"] as const;
export type AllowPrivate = (typeof allowPrivateValues)[number];

/** Resolves a host name to its addresses (default: the system resolver, as Node's sockets use). */
export type Resolve = (hostname: string, family: 0 | 4 | 6) => Promise<LookupAddress[]>;

export interface OutboundSettings {
  allowPrivate: AllowPrivate;
  /** PLATFORM_EXECUTION_DENY_LIST entries. */
  denyList: DenyList;
  /** A resolver in place of the system's (tests: names that resolve to chosen addresses). */
  resolve?: Resolve;
}

/** The error of a refused connection (its `code` is `EOUTBOUNDREFUSED`). */
export class OutboundRefusedError extends Error {
  readonly code = "EOUTBOUNDREFUSED";
  constructor(message: string) {
    super(message);
    this.name = "OutboundRefusedError";
  }
}

const systemResolve: Resolve = (hostname, family) =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true, family }, (error, addresses) =>
      error ? reject(error) : resolve(addresses),
    );
  });

/** The process's policy: one guard per level. */
export class OutboundPolicy {
  private readonly guards: Record<OutboundLevel, OutboundGuard>;

  constructor(readonly settings: OutboundSettings) {
    this.guards = {
      instance: new OutboundGuard(settings, "instance"),
      organization: new OutboundGuard(settings, "organization"),
    };
  }

  /** From the configuration (PLATFORM_OUTBOUND_ALLOW_PRIVATE, PLATFORM_EXECUTION_DENY_LIST). */
  static fromConfig(
    config: { outbound: { allowPrivate: AllowPrivate; denyList: string[] } },
    options: { resolve?: Resolve } = {},
  ): OutboundPolicy {
    return new OutboundPolicy({
      allowPrivate: config.outbound.allowPrivate,
      denyList: new DenyList(config.outbound.denyList),
      resolve: options.resolve,
    });
  }

  /** The checks for destinations configured at `level`. */
  guard(level: OutboundLevel): OutboundGuard {
    return this.guards[level];
  }
}

/** The checks of one level; hand its `lookup` (or `connect`) to every socket of that level. */
export class OutboundGuard {
  /** Whether loopback and private addresses may be reached at this level. */
  readonly allowsPrivate: boolean;
  private readonly resolver: Resolve;

  constructor(
    private readonly settings: OutboundSettings,
    readonly level: OutboundLevel,
  ) {
    this.allowsPrivate =
      settings.allowPrivate === "all" || (settings.allowPrivate === "instance" && level === "instance");
    this.resolver = settings.resolve ?? systemResolve;
  }

  /**
   * Why a host as configured (a URL's host, `[::1]` included, or a bare name or address) may not be
   * reached; undefined when it may (a name is checked again, address by address, by `lookup`).
   */
  refusalOfHost(hostname: string): string | undefined {
    const host = stripBrackets(hostname);
    if (net.isIP(host)) return this.refusalOfAddress(host);
    if (this.settings.denyList.deniesHost(host))
      return `host ${host} is denied by PLATFORM_EXECUTION_DENY_LIST`;
    return undefined;
  }

  /**
   * Why `address` may not be reached; undefined when it may. `via` is the name it was resolved from: the
   * message then names the kind of address, not the address (the answer of an internal DNS stays
   * internal).
   */
  refusalOfAddress(address: string, via?: string): string | undefined {
    const subject = via === undefined ? `${address} is` : `${via} resolves to`;
    const kind = addressKind(address);
    if (kind === undefined) return `${subject} not an IP address`;
    if (ALWAYS_REFUSED.has(kind))
      return `${subject} ${KIND_PHRASES[kind]}, closed to every outbound connection`;
    if (PRIVATE_KINDS.has(kind) && !this.allowsPrivate) {
      return this.settings.allowPrivate === "none"
        ? `${subject} ${KIND_PHRASES[kind]}, closed by PLATFORM_OUTBOUND_ALLOW_PRIVATE=none`
        : `${subject} ${KIND_PHRASES[kind]}, closed to what an organization configures (PLATFORM_OUTBOUND_ALLOW_PRIVATE=all opens it)`;
    }
    if (this.settings.denyList.deniesAddress(address)) {
      return via === undefined
        ? `host ${address} is denied by PLATFORM_EXECUTION_DENY_LIST`
        : `${via} resolves to an address denied by PLATFORM_EXECUTION_DENY_LIST`;
    }
    return undefined;
  }

  /**
   * The addresses of `hostname` when every one of them may be reached; rejects with an
   * OutboundRefusedError naming the first that may not (or with the resolver's error).
   */
  async resolve(hostname: string, family: 0 | 4 | 6 = 0): Promise<LookupAddress[]> {
    const host = stripBrackets(hostname);
    if (net.isIP(host)) {
      const refusal = this.refusalOfAddress(host);
      if (refusal) throw new OutboundRefusedError(refusal);
      return [{ address: host, family: net.isIP(host) }];
    }
    const named = this.refusalOfHost(host);
    if (named) throw new OutboundRefusedError(named);
    const addresses = (await this.resolver(host, family)).filter((a) => family === 0 || a.family === family);
    if (addresses.length === 0) {
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND", hostname: host });
    }
    for (const { address } of addresses) {
      const refusal = this.refusalOfAddress(address, host);
      if (refusal) throw new OutboundRefusedError(refusal);
    }
    return addresses;
  }

  /** The socket lookup function (`lookup` of net, tls, http and https): `resolve` in Node's callback shape. */
  readonly lookup: net.LookupFunction = (hostname, options, callback) => {
    const family =
      options.family === 4 || options.family === "IPv4"
        ? 4
        : options.family === 6 || options.family === "IPv6"
          ? 6
          : 0;
    this.resolve(hostname, family).then(
      (addresses) => {
        if (options.all) callback(null, addresses);
        else callback(null, addresses[0].address, addresses[0].family);
      },
      (error: NodeJS.ErrnoException) => callback(error, "", 0),
    );
  };

  /**
   * A TCP connection (with `tls`, a TLS connection; SNI is the host name) to `host`:`port` under this
   * guard: an IP literal is checked first, a name through `lookup`. A refusal is the socket's `error`
   * event (an OutboundRefusedError), as a failed connection's would be.
   */
  connect(options: OutboundConnectOptions): net.Socket {
    const { host: configured, port, tls: secure, ...rest } = options;
    const host = stripBrackets(configured);
    const refusal = net.isIP(host) ? this.refusalOfAddress(host) : undefined;
    if (refusal) {
      const socket = new net.Socket();
      process.nextTick(() => socket.destroy(new OutboundRefusedError(refusal)));
      return socket;
    }
    const common = { ...rest, host, port, lookup: this.lookup };
    if (!secure) return net.connect(common);
    const tlsOptions = secure === true ? {} : secure;
    return tls.connect({ ...(net.isIP(host) ? {} : { servername: host }), ...tlsOptions, ...common });
  }
}

export interface OutboundConnectOptions {
  host: string;
  port: number;
  /** TLS from the start (`true`, or the options of `tls.connect`). */
  tls?: boolean | tls.ConnectionOptions;
  /** Socket idle timeout (ms), as net.connect's `timeout`. */
  timeout?: number;
}
