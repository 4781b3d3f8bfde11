import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import { type ApiService, apiService } from "../../api/register.ts";
import type { Permission } from "../../auth/permissions.ts";
import { DEFAULT_WEB_KEY_CONFIG, type WebKeyConfig } from "../../domain/web-key/events.ts";
import { InternalError, InvalidArgumentError } from "../../errors.ts";
import {
  ActivateWebKeyResponseSchema,
  CreateWebKeyResponseSchema,
  DeleteWebKeyResponseSchema,
  ECDSACurve,
  type GetWebKey,
  GetWebKeySchema,
  ListWebKeysResponseSchema,
  PlatformWebKeys,
  RSABits,
  RSAHasher,
  type WebKey,
  WebKeySchema,
  type WebKeyState,
} from "../../gen/platform/resources/web_key/v3alpha/web_key_service_pb.ts";
import type { KeyVersion, ListedKey } from "../../oidc/keys.ts";
import { authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { resourceDetails } from "../mapping.ts";

type WebKeyPermission = Extract<Permission, `web_key.${string}`>;

const RSA_BITS: Record<number, 2048 | 3072 | 4096> = {
  [RSABits.RSA_BITS_UNSPECIFIED]: 2048,
  [RSABits.RSA_BITS_2048]: 2048,
  [RSABits.RSA_BITS_3072]: 3072,
  [RSABits.RSA_BITS_4096]: 4096,
};
const RSA_HASHERS: Record<number, "SHA256" | "SHA384" | "SHA512"> = {
  [RSAHasher.RSA_HASHER_UNSPECIFIED]: "SHA256",
  [RSAHasher.RSA_HASHER_SHA256]: "SHA256",
  [RSAHasher.RSA_HASHER_SHA384]: "SHA384",
  [RSAHasher.RSA_HASHER_SHA512]: "SHA512",
};
const ECDSA_CURVES: Record<number, "P256" | "P384" | "P521"> = {
  [ECDSACurve.ECDSA_CURVE_UNSPECIFIED]: "P256",
  [ECDSACurve.ECDSA_CURVE_P256]: "P256",
  [ECDSACurve.ECDSA_CURVE_P384]: "P384",
  [ECDSACurve.ECDSA_CURVE_P521]: "P521",
};

/** The configuration of a CreateWebKey request, defaults filled in (the enums are checked by their rules). */
function configOf(key: WebKey | undefined): WebKeyConfig {
  const config = key?.config;
  switch (config?.case) {
    case "rsa": {
      const bits = RSA_BITS[config.value.bits];
      const hasher = RSA_HASHERS[config.value.hasher];
      if (!bits) throw new InvalidArgumentError("must be 2048, 3072 or 4096 bits", "key.rsa.bits");
      if (!hasher) throw new InvalidArgumentError("must be SHA256, SHA384 or SHA512", "key.rsa.hasher");
      return { rsa: { bits, hasher } };
    }
    case "ecdsa": {
      const curve = ECDSA_CURVES[config.value.curve];
      if (!curve) throw new InvalidArgumentError("must be P256, P384 or P521", "key.ecdsa.curve");
      return { ecdsa: { curve } };
    }
    case "ed25519":
      return { ed25519: {} };
    default:
      return DEFAULT_WEB_KEY_CONFIG;
  }
}

/** A stored configuration as the API shows it. */
function toWebKey(config: WebKeyConfig): WebKey {
  const value = (entries: Record<number, string | number>, wanted: string | number) =>
    Number(Object.entries(entries).find(([n, v]) => Number(n) !== 0 && v === wanted)?.[0] ?? 0);
  if ("rsa" in config)
    return create(WebKeySchema, {
      config: {
        case: "rsa",
        value: {
          bits: value(RSA_BITS, config.rsa.bits) as RSABits,
          hasher: value(RSA_HASHERS, config.rsa.hasher) as RSAHasher,
        },
      },
    });
  if ("ecdsa" in config)
    return create(WebKeySchema, {
      config: { case: "ecdsa", value: { curve: value(ECDSA_CURVES, config.ecdsa.curve) as ECDSACurve } },
    });
  return create(WebKeySchema, { config: { case: "ed25519", value: {} } });
}

function details(version: KeyVersion, instanceId: string) {
  return resourceDetails({ ...version, owner: { type: 2, id: instanceId } });
}

function toGetWebKey({ key, state }: ListedKey, instanceId: string): GetWebKey {
  const time = (d: Date | undefined) => (d ? timestampFromDate(d) : undefined);
  return create(GetWebKeySchema, {
    details: details({ id: key.id, sequence: key.sequence, changeDate: key.changedAt }, instanceId),
    state: state as WebKeyState,
    config: toWebKey(key.config),
    algorithm: key.alg,
    activeFrom: time(key.activeFrom),
    activeUntil: time(key.activeUntil),
    publishedUntil: time(key.publishUntil),
  });
}

/**
 * PlatformWebKeys: the signing keys of the instance of the Host header (docs/oidc.md "Signing keys").
 * Instance-wide: only instance roles grant `web_key.*`.
 */
export function webKeysService(deps: ServiceDeps): ApiService {
  const gate = async (ctx: HandlerContext, permission: WebKeyPermission) => {
    const call = await authorize(deps, ctx, permission);
    if (call.context.type === "system") throw new InternalError("web keys need an instance context");
    return { ...call, instanceId: call.context.instanceId };
  };
  const keys = deps.signingKeys;
  return apiService(PlatformWebKeys, {
    async createWebKey(req, ctx) {
      const call = await gate(ctx, "web_key.write");
      const version = await keys.create(call.instanceId, configOf(req.key), call.creator);
      return create(CreateWebKeyResponseSchema, { details: details(version, call.instanceId) });
    },

    async activateWebKey(req, ctx) {
      const call = await gate(ctx, "web_key.write");
      const version = await keys.activate(call.instanceId, req.id, call.creator);
      return create(ActivateWebKeyResponseSchema, { details: details(version, call.instanceId) });
    },

    async deleteWebKey(req, ctx) {
      const call = await gate(ctx, "web_key.delete");
      const version = await keys.remove(call.instanceId, req.id, call.creator);
      return create(DeleteWebKeyResponseSchema, { details: details(version, call.instanceId) });
    },

    async listWebKeys(_req, ctx) {
      const call = await gate(ctx, "web_key.read");
      const listed = await keys.list(call.instanceId);
      return create(ListWebKeysResponseSchema, {
        webKeys: listed.map((l) => toGetWebKey(l, call.instanceId)),
      });
    },
  });
}
