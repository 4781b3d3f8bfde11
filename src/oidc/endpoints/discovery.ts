import { ACR_VALUES_SUPPORTED } from "../../domain/session/amr.ts";
import { OwnerType } from "../../domain/settings/events.ts";
import { LANGUAGE, supportedLanguages } from "../../domain/settings/languages.ts";
import { resolveSetting, settingsLayers } from "../../query/settings.ts";
import { ASSERTION_ALGS, endpointAuthMethods } from "../client-auth.ts";
import { GrantType } from "../clients.ts";
import type { OidcContext, RequestInfo } from "../context.ts";
import { OidcPath } from "../issuer.ts";
import { STANDARD_SCOPES } from "../scopes.ts";

/** Claims this provider may put into ID tokens, userinfo and introspection answers. */
export const CLAIMS_SUPPORTED = [
  "sub",
  "aud",
  "exp",
  "iat",
  "iss",
  "auth_time",
  "nonce",
  "amr",
  "acr",
  "azp",
  "sid",
  "at_hash",
  "c_hash",
  "client_id",
  "act",
  "name",
  "given_name",
  "family_name",
  "nickname",
  "preferred_username",
  "locale",
  "updated_at",
  "email",
  "email_verified",
  "phone_number",
  "phone_number_verified",
  "urn:platform:iam:org:project:roles",
  "urn:platform:iam:user:metadata",
  "urn:platform:iam:user:data",
  "urn:platform:iam:user:resourceowner:id",
  "urn:platform:iam:user:resourceowner:name",
  "urn:platform:iam:user:resourceowner:primary_domain",
];

/** The instance's restricted languages (its UI locales): the language settings, else all supported. */
async function uiLocales(ctx: OidcContext, instanceId: string): Promise<string[]> {
  const layers = await settingsLayers(ctx.db, LANGUAGE, { type: "instance", instanceId });
  return resolveSetting<string[]>(
    layers,
    "restricted_languages",
    { type: OwnerType.instance, id: instanceId },
    [...supportedLanguages],
  ).value;
}

/** The OpenID Connect Discovery 1.0 document of an instance under one issuer. */
export async function discoveryDocument(
  ctx: OidcContext,
  info: RequestInfo,
): Promise<Record<string, unknown>> {
  const { issuer } = info;
  const [flags, locales, algorithms] = await Promise.all([
    ctx.features.flags(info.instance.id),
    uiLocales(ctx, info.instance.id),
    ctx.keys.algorithms(info.instance.id),
  ]);
  const grantTypes: string[] = [
    GrantType.authorizationCode,
    GrantType.implicit,
    GrantType.refreshToken,
    GrantType.clientCredentials,
    GrantType.jwtBearer,
  ];
  if (flags.token_exchange) grantTypes.push(GrantType.tokenExchange);
  return {
    issuer,
    authorization_endpoint: issuer + OidcPath.authorize,
    token_endpoint: issuer + OidcPath.token,
    introspection_endpoint: issuer + OidcPath.introspect,
    userinfo_endpoint: issuer + OidcPath.userinfo,
    revocation_endpoint: issuer + OidcPath.revoke,
    end_session_endpoint: issuer + OidcPath.endSession,
    jwks_uri: issuer + OidcPath.keys,
    scopes_supported: [...STANDARD_SCOPES],
    response_types_supported: ["code", "id_token", "id_token token"],
    response_modes_supported: ["query", "fragment", "form_post"],
    grant_types_supported: grantTypes,
    subject_types_supported: ["public"],
    // the algorithms of the published keys, the active key's first
    id_token_signing_alg_values_supported: algorithms,
    token_endpoint_auth_methods_supported: [...endpointAuthMethods.token],
    token_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGS,
    revocation_endpoint_auth_methods_supported: [...endpointAuthMethods.revocation],
    revocation_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGS,
    introspection_endpoint_auth_methods_supported: [...endpointAuthMethods.introspection],
    introspection_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGS,
    claims_supported: CLAIMS_SUPPORTED,
    acr_values_supported: [...ACR_VALUES_SUPPORTED],
    code_challenge_methods_supported: ["S256"],
    prompt_values_supported: ["none", "login", "consent", "select_account", "create"],
    ui_locales_supported: locales,
    request_parameter_supported: false,
    request_uri_parameter_supported: false,
    authorization_response_iss_parameter_supported: true,
  };
}
