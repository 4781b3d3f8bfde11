import assert from "node:assert/strict";
import type { LookupAddress } from "node:dns";
import net from "node:net";
import { describe, it } from "node:test";
import { ConfigError, loadConfig } from "../config.ts";
import { type AddressKind, addressKind } from "./addresses.ts";
import { DenyList } from "./deny-list.ts";
import { type AllowPrivate, OutboundPolicy, OutboundRefusedError, type Resolve } from "./outbound.ts";

const policy = (allowPrivate: AllowPrivate, deny: string[] = [], resolve?: Resolve) =>
  new OutboundPolicy({ allowPrivate, denyList: new DenyList(deny), resolve });

/** A resolver knowing only `names`. */
const resolverOf =
  (names: Record<string, string[]>): Resolve =>
  async (hostname) => {
    const addresses = names[hostname];
    if (!addresses)
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    return addresses.map((address): LookupAddress => ({ address, family: net.isIP(address) }));
  };

describe("outbound-address policy: kinds of addresses", () => {
  const table: Record<AddressKind, string[]> = {
    metadata: [
      "169.254.169.254",
      "169.254.170.2",
      "100.100.100.200",
      "168.63.129.16",
      "192.0.0.192",
      "fd00:ec2::254",
      "FD00:EC2:0:0:0:0:0:254",
      "::ffff:169.254.169.254",
      "::ffff:a9fe:a9fe",
      "::ffff:0:a9fe:a9fe",
      "64:ff9b::169.254.169.254",
      "64:ff9b::a9fe:a9fe",
      "64:ff9b:1::a9fe:a9fe",
      "2002:a9fe:a9fe::1",
    ],
    "link-local": [
      "169.254.0.1",
      "169.254.255.255",
      "fe80::1",
      "fe80::1%eth0",
      "febf::1",
      "::ffff:169.254.1.1",
    ],
    unspecified: ["0.0.0.0", "0.1.2.3", "::", "0:0:0:0:0:0:0:0", "::ffff:0.0.0.0"],
    multicast: ["224.0.0.1", "239.255.255.250", "ff02::1", "ff05::1:3"],
    reserved: ["255.255.255.255", "240.0.0.1", "::a9fe:a9fe", "::127.0.0.1", "100::1"],
    loopback: [
      "127.0.0.1",
      "127.255.255.254",
      "::1",
      "0:0:0:0:0:0:0:1",
      "::ffff:127.0.0.1",
      "64:ff9b::7f00:1",
    ],
    private: [
      "10.0.0.1",
      "172.16.0.1",
      "172.31.255.255",
      "192.168.1.1",
      "100.64.0.1",
      "100.127.255.255",
      "198.18.0.1",
      "fc00::1",
      "fd12:3456::1",
      "fec0::1",
      "::ffff:10.1.2.3",
      "64:ff9b::a01:203",
      "64:ff9b:1::808:808",
      "2002:c0a8:101::1",
    ],
    public: [
      "93.184.216.34",
      "8.8.8.8",
      "172.32.0.1",
      "100.128.0.1",
      "169.253.255.255",
      "2606:4700::1111",
      "::ffff:8.8.8.8",
      "64:ff9b::808:808",
      "2002:808:808::1",
    ],
  };

  it("classifies IPv4, IPv6 and the IPv4 addresses IPv6 carries (mapped, translated, NAT64, 6to4)", () => {
    for (const [kind, addresses] of Object.entries(table))
      for (const address of addresses) assert.equal(addressKind(address), kind, address);
  });

  it("answers undefined for what is not an IP address (names, numbers, decimal forms)", () => {
    for (const value of ["localhost", "2852039166", "0251.0376.0251.0376", "", "1.2.3", "::g"])
      assert.equal(addressKind(value), undefined, value);
  });
});

describe("outbound-address policy: levels, the variable and the deny list", () => {
  it("always refuses link-local, metadata, unspecified, multicast and reserved addresses, at every level and setting", () => {
    for (const allow of ["none", "instance", "all"] as const) {
      for (const level of ["instance", "organization"] as const) {
        const guard = policy(allow).guard(level);
        for (const address of [
          "169.254.169.254",
          "fe80::1",
          "fd00:ec2::254",
          "100.100.100.200",
          "0.0.0.0",
          "::",
          "224.0.0.1",
          "ff02::1",
          "255.255.255.255",
          "::ffff:169.254.169.254",
        ])
          assert.ok(guard.refusalOfAddress(address), `${allow}/${level}: ${address}`);
        assert.equal(guard.refusalOfAddress("93.184.216.34"), undefined);
      }
    }
    assert.equal(
      policy("all").guard("instance").refusalOfAddress("169.254.169.254"),
      "169.254.169.254 is a cloud metadata address, closed to every outbound connection",
    );
  });

  it("loopback and private: PLATFORM_OUTBOUND_ALLOW_PRIVATE decides per level (default: the instance only)", () => {
    const loopbackAndPrivate = ["127.0.0.1", "::1", "10.0.0.1", "192.168.0.1", "100.64.0.1", "fd12::1"];
    const allowed = (allow: AllowPrivate, level: "instance" | "organization") =>
      loopbackAndPrivate.filter((a) => policy(allow).guard(level).refusalOfAddress(a) === undefined);
    assert.deepEqual(allowed("instance", "instance"), loopbackAndPrivate);
    assert.deepEqual(allowed("instance", "organization"), []);
    assert.deepEqual(allowed("all", "organization"), loopbackAndPrivate);
    assert.deepEqual(allowed("none", "instance"), []);
    assert.equal(
      policy("instance").guard("organization").refusalOfAddress("127.0.0.1"),
      "127.0.0.1 is a loopback address, closed to what an organization configures (PLATFORM_OUTBOUND_ALLOW_PRIVATE=all opens it)",
    );
    assert.equal(
      policy("none").guard("instance").refusalOfAddress("10.0.0.1", "db.internal"),
      "db.internal resolves to a private address, closed by PLATFORM_OUTBOUND_ALLOW_PRIVATE=none",
    );
  });

  it("PLATFORM_OUTBOUND_ALLOW_PRIVATE: instance by default; a bad value stops the start naming the variable", () => {
    assert.deepEqual(loadConfig({}).outbound, { allowPrivate: "instance", denyList: [] });
    assert.equal(loadConfig({ PLATFORM_OUTBOUND_ALLOW_PRIVATE: "ALL" }).outbound.allowPrivate, "all");
    assert.equal(loadConfig({ PLATFORM_OUTBOUND_ALLOW_PRIVATE: "none" }).outbound.allowPrivate, "none");
    assert.throws(
      () => loadConfig({ PLATFORM_OUTBOUND_ALLOW_PRIVATE: "true" }),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.message === 'PLATFORM_OUTBOUND_ALLOW_PRIVATE: "true" is not one of none, instance, all',
    );
  });

  it("PLATFORM_EXECUTION_DENY_LIST adds addresses, networks and names at every level; a bad entry stops the start", () => {
    assert.deepEqual(
      loadConfig({ PLATFORM_EXECUTION_DENY_LIST: " 10.0.0.0/8 , localhost" }).outbound.denyList,
      ["10.0.0.0/8", "localhost"],
    );
    for (const bad of ["10.0.0.0/33", "not a host!", "1.2.3.4/x"]) {
      assert.throws(
        () => loadConfig({ PLATFORM_EXECUTION_DENY_LIST: bad }),
        /^ConfigError: PLATFORM_EXECUTION_DENY_LIST: ".*" is/,
      );
    }
    const guard = policy("all", ["203.0.113.0/24", "*.corp", "2001:db8::/32"]).guard("instance");
    assert.equal(
      guard.refusalOfHost("203.0.113.9"),
      "host 203.0.113.9 is denied by PLATFORM_EXECUTION_DENY_LIST",
    );
    assert.equal(guard.refusalOfHost("db.corp"), "host db.corp is denied by PLATFORM_EXECUTION_DENY_LIST");
    assert.equal(
      guard.refusalOfAddress("::ffff:203.0.113.9", "x.example"),
      "x.example resolves to an address denied by PLATFORM_EXECUTION_DENY_LIST",
    );
    assert.ok(guard.refusalOfAddress("64:ff9b::cb00:7109"), "NAT64 of a denied IPv4 address");
    assert.ok(guard.refusalOfHost("[2001:db8::1]"), "an IPv6 literal of a URL");
    assert.equal(guard.refusalOfHost("example.com"), undefined);
  });

  it("the deny list matches addresses, networks (IPv4, IPv6, IPv4-mapped) and host names", () => {
    const list = new DenyList([
      "10.0.0.0/8",
      "192.168.1.7",
      "fc00::/7",
      "::1",
      "metadata.internal",
      "*.corp",
    ]);
    assert.ok(list.deniesAddress("10.1.2.3"));
    assert.ok(!list.deniesAddress("11.1.2.3"));
    assert.ok(list.deniesAddress("192.168.1.7"));
    assert.ok(!list.deniesAddress("192.168.1.8"));
    assert.ok(list.deniesAddress("fd12::1"));
    assert.ok(list.deniesAddress("::1"));
    assert.ok(list.deniesAddress("::ffff:10.0.0.1"), "IPv4-mapped IPv6");
    assert.ok(list.deniesHost("METADATA.internal."));
    assert.ok(list.deniesHost("db.corp"));
    assert.ok(!list.deniesHost("corp"));
    assert.ok(list.deniesHost("[::1]"), "an IPv6 literal of a URL");
    assert.ok(list.deniesHost("10.9.9.9"), "an IPv4 literal");
    assert.ok(!list.deniesHost("example.com"));
    assert.ok(new DenyList([]).empty);
  });
});

describe("outbound-address policy: sockets", () => {
  it("lookup refuses a name when any of its addresses is refused, and answers exactly the addresses it checked", async () => {
    const guard = policy(
      "instance",
      [],
      resolverOf({
        "svc.test": ["127.0.0.1", "::1"],
        "mixed.test": ["93.184.216.34", "169.254.169.254"],
        "public.test": ["93.184.216.34"],
      }),
    ).guard("instance");
    const lookup = (host: string, all: boolean) =>
      new Promise<unknown>((resolve, reject) =>
        guard.lookup(host, { all }, (error, address, family) =>
          error ? reject(error) : resolve(all ? address : [address, family]),
        ),
      );
    assert.deepEqual(await lookup("svc.test", true), [
      { address: "127.0.0.1", family: 4 },
      { address: "::1", family: 6 },
    ]);
    assert.deepEqual(await lookup("svc.test", false), ["127.0.0.1", 4]);
    await assert.rejects(lookup("mixed.test", true), (error: unknown) => {
      assert.ok(error instanceof OutboundRefusedError);
      assert.equal(error.code, "EOUTBOUNDREFUSED");
      assert.equal(
        error.message,
        "mixed.test resolves to a cloud metadata address, closed to every outbound connection",
      );
      return true;
    });
    await assert.rejects(lookup("unknown.test", true), { code: "ENOTFOUND" });
    assert.deepEqual(
      await guard.resolve("public.test", 6).catch((e: Error) => e.message),
      "getaddrinfo ENOTFOUND public.test",
    );
  });

  it("connect: checks IP literals before connecting and names in the socket's lookup; allowed connections work", async () => {
    const server = net.createServer((socket) => socket.end("hello"));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as net.AddressInfo).port;
    let accepted = 0;
    server.on("connection", () => accepted++);
    const outcome = (socket: net.Socket) =>
      new Promise<string>((resolve) => {
        let data = "";
        socket.on("data", (chunk) => (data += chunk));
        socket.on("end", () => resolve(`data:${data}`));
        socket.on("error", (error) =>
          resolve(`error:${(error as NodeJS.ErrnoException).code}:${error.message}`),
        );
      });
    try {
      const resolve = resolverOf({ "svc.test": ["127.0.0.1"] });
      const organization = policy("instance", [], resolve).guard("organization");
      const instance = policy("instance", [], resolve).guard("instance");
      assert.equal(
        await outcome(organization.connect({ host: "0.0.0.0", port })),
        "error:EOUTBOUNDREFUSED:0.0.0.0 is an unspecified address, closed to every outbound connection",
      );
      assert.equal(
        await outcome(organization.connect({ host: "[::ffff:127.0.0.1]", port, tls: true })),
        "error:EOUTBOUNDREFUSED:::ffff:127.0.0.1 is a loopback address, closed to what an organization configures (PLATFORM_OUTBOUND_ALLOW_PRIVATE=all opens it)",
      );
      assert.equal(
        await outcome(organization.connect({ host: "svc.test", port })),
        "error:EOUTBOUNDREFUSED:svc.test resolves to a loopback address, closed to what an organization configures (PLATFORM_OUTBOUND_ALLOW_PRIVATE=all opens it)",
      );
      assert.match(
        await outcome(policy("instance").guard("organization").connect({ host: "localhost", port })),
        /^error:EOUTBOUNDREFUSED:localhost resolves to a loopback address/,
        "the system resolver's answer is checked too",
      );
      assert.equal(accepted, 0, "no refused connection reached the server");
      // svc.test exists only in the guard's resolver: the socket connects to the address the guard answered
      assert.equal(await outcome(instance.connect({ host: "svc.test", port })), "data:hello");
      assert.equal(await outcome(instance.connect({ host: "127.0.0.1", port })), "data:hello");
    } finally {
      server.close();
    }
  });
});
