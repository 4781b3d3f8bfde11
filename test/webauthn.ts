/**
 * A software WebAuthn authenticator for tests: a P-256 key per credential (node:crypto), registration
 * responses with `none` attestation (the attestation object CBOR-encoded here) and assertions, as a browser
 * would hand them to a relying party (`PublicKeyCredential.toJSON()`). Every field can be spoiled on purpose.
 */
import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from "node:crypto";

const b64url = (bytes: Uint8Array | string) => Buffer.from(bytes).toString("base64url");

/** Minimal CBOR (RFC 8949): unsigned and negative integers, byte and text strings, maps. */
export function cbor(value: unknown): Buffer {
  const head = (major: number, n: number): Buffer => {
    if (n < 24) return Buffer.from([(major << 5) | n]);
    if (n < 0x100) return Buffer.from([(major << 5) | 24, n]);
    if (n < 0x10000) return Buffer.from([(major << 5) | 25, n >> 8, n & 0xff]);
    const b = Buffer.alloc(5);
    b[0] = (major << 5) | 26;
    b.writeUInt32BE(n, 1);
    return b;
  };
  if (typeof value === "number") return value >= 0 ? head(0, value) : head(1, -1 - value);
  if (typeof value === "string") {
    const bytes = Buffer.from(value, "utf8");
    return Buffer.concat([head(3, bytes.length), bytes]);
  }
  if (value instanceof Uint8Array) return Buffer.concat([head(2, value.length), value]);
  if (value instanceof Map) {
    const parts = [head(5, value.size)];
    for (const [k, v] of value) parts.push(cbor(k), cbor(v));
    return Buffer.concat(parts);
  }
  throw new Error(`cbor: unsupported ${typeof value}`);
}

export const Flags = { UP: 0x01, UV: 0x04, BE: 0x08, BS: 0x10, AT: 0x40 } as const;

export interface Credential {
  id: Buffer;
  privateKey: KeyObject;
  cose: Buffer;
  counter: number;
  userHandle?: string;
}

/** The options a relying party answered (the parts the authenticator reads). */
type Options = { challenge: string; rp?: { id?: string }; rpId?: string; user?: { id: string } };

export interface Spoil {
  origin?: string;
  rpId?: string;
  challenge?: string;
  type?: string;
  flags?: number;
  counter?: number;
  signature?: "wrong";
  userHandle?: string | null;
}

export class SoftAuthenticator {
  readonly credentials: Credential[] = [];

  constructor(
    readonly origin: string,
    /** The flags of every response (default: user present and verified). */
    readonly flags = Flags.UP | Flags.UV,
  ) {}

  /** A new credential answering `options` of `navigator.credentials.create` (RegistrationResponseJSON). */
  register(options: Options, spoil: Spoil = {}): { json: Record<string, unknown>; credential: Credential } {
    const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const jwk = publicKey.export({ format: "jwk" });
    const cose = cbor(
      new Map<number, unknown>([
        [1, 2],
        [3, -7],
        [-1, 1],
        [-2, Buffer.from(jwk.x!, "base64url")],
        [-3, Buffer.from(jwk.y!, "base64url")],
      ]),
    );
    const credential: Credential = {
      id: randomBytes(16),
      privateKey,
      cose,
      counter: 0,
      userHandle: options.user?.id,
    };
    const rpId = spoil.rpId ?? options.rp?.id ?? "";
    const idLength = Buffer.alloc(2);
    idLength.writeUInt16BE(credential.id.length);
    const authData = Buffer.concat([
      this.authData(rpId, (spoil.flags ?? this.flags) | Flags.AT, spoil.counter ?? 0),
      Buffer.alloc(16), // AAGUID: none
      idLength,
      credential.id,
      cose,
    ]);
    const clientData = this.clientData(
      spoil.type ?? "webauthn.create",
      spoil.challenge ?? options.challenge,
      spoil,
    );
    const attestationObject = cbor(
      new Map<string, unknown>([
        ["fmt", "none"],
        ["attStmt", new Map()],
        ["authData", authData],
      ]),
    );
    return {
      credential,
      json: {
        id: b64url(credential.id),
        rawId: b64url(credential.id),
        type: "public-key",
        response: {
          clientDataJSON: b64url(clientData),
          attestationObject: b64url(attestationObject),
          transports: ["internal"],
        },
        clientExtensionResults: {},
        authenticatorAttachment: "platform",
      },
    };
  }

  /** Keeps a registered credential (after the relying party accepted it). */
  keep(credential: Credential): void {
    this.credentials.push(credential);
  }

  /** An assertion by `credential` answering `options` of `navigator.credentials.get`. */
  assert(credential: Credential, options: Options, spoil: Spoil = {}): Record<string, unknown> {
    credential.counter = spoil.counter ?? credential.counter + 1;
    const rpId = spoil.rpId ?? options.rpId ?? "";
    const authData = this.authData(rpId, spoil.flags ?? this.flags, credential.counter);
    const clientData = this.clientData(
      spoil.type ?? "webauthn.get",
      spoil.challenge ?? options.challenge,
      spoil,
    );
    const signed = Buffer.concat([authData, createHash("sha256").update(clientData).digest()]);
    let signature = sign("sha256", signed, credential.privateKey);
    if (spoil.signature === "wrong") signature = sign("sha256", Buffer.from("other"), credential.privateKey);
    const userHandle = spoil.userHandle === undefined ? credential.userHandle : spoil.userHandle;
    return {
      id: b64url(credential.id),
      rawId: b64url(credential.id),
      type: "public-key",
      response: {
        clientDataJSON: b64url(clientData),
        authenticatorData: b64url(authData),
        signature: b64url(signature),
        ...(userHandle ? { userHandle } : {}),
      },
      clientExtensionResults: {},
      authenticatorAttachment: "platform",
    };
  }

  private authData(rpId: string, flags: number, counter: number): Buffer {
    const count = Buffer.alloc(4);
    count.writeUInt32BE(counter);
    return Buffer.concat([createHash("sha256").update(rpId).digest(), Buffer.from([flags]), count]);
  }

  private clientData(type: string, challenge: string, spoil: Spoil): Buffer {
    return Buffer.from(
      JSON.stringify({ type, challenge, origin: spoil.origin ?? this.origin, crossOrigin: false }),
      "utf8",
    );
  }
}
