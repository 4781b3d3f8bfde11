/**
 * The branding's public files (docs/branding.md "Assets"), on every instance's domains:
 *
 *   GET /assets/v3alpha/instances/<instance>/images/<sha256>.<ext>        an image of the branding settings
 *   GET /assets/v3alpha/instances/<instance>/branding/<org|->/<hash>.css  the login's branding stylesheet
 *
 * Both are named by their content's hash, so they are cached for good (`public, max-age=31536000,
 * immutable`); a path of another instance than the Host's, an unknown hash or a wrong extension is 404. An
 * SVG is served with `Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; sandbox`:
 * opened directly (not through `<img>`, where scripts never run) its scripts do not run, it loads nothing
 * and it is an opaque origin. `X-Content-Type-Options: nosniff` (on every answer, src/server/server.ts)
 * keeps browsers to the type served.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { BRANDING, IMAGE_EXTENSIONS, type ImageType } from "../domain/settings/branding.ts";
import { findBrandingAsset } from "../query/branding.ts";
import { settingsLayers } from "../query/settings.ts";
import { pageBranding } from "./branding.ts";
import type { Login } from "./login.ts";

export const IMMUTABLE = "public, max-age=31536000, immutable";
export const SVG_POLICY = "default-src 'none'; style-src 'unsafe-inline'; sandbox";

const notFound = (reply: FastifyReply) =>
  reply
    .code(404)
    .header("cache-control", "no-store")
    .send({ code: 5, message: "asset not found", details: [] });

/** The request's instance, when the path names it (assets of one instance are not served on another's domains). */
function instanceOf(request: FastifyRequest<{ Params: { instance: string } }>): string | undefined {
  const { instanceId } = request.scope;
  return instanceId && request.params.instance === instanceId ? instanceId : undefined;
}

export function registerBrandingAssets(app: FastifyInstance, login: Login): void {
  const { db } = login.deps;

  app.get<{ Params: { instance: string; file: string } }>(
    "/assets/v3alpha/instances/:instance/images/:file",
    async (request, reply) => {
      const instanceId = instanceOf(request);
      const file = /^([0-9a-f]{64})\.([a-z]+)$/.exec(request.params.file);
      if (!instanceId || !file) return notFound(reply);
      const asset = await findBrandingAsset(db, instanceId, file[1]);
      if (!asset || IMAGE_EXTENSIONS[asset.contentType as ImageType] !== file[2]) return notFound(reply);
      if (asset.contentType === "image/svg+xml") reply.header("content-security-policy", SVG_POLICY);
      return reply.header("cache-control", IMMUTABLE).type(asset.contentType).send(asset.content);
    },
  );

  app.get<{ Params: { instance: string; scope: string; file: string } }>(
    "/assets/v3alpha/instances/:instance/branding/:scope/:file",
    async (request, reply) => {
      const instanceId = instanceOf(request);
      const hash = /^([0-9a-f]{16})\.css$/.exec(request.params.file)?.[1];
      if (!instanceId || !hash) return notFound(reply);
      const orgId = request.params.scope === "-" ? undefined : request.params.scope;
      let stylesheet = (await login.branding(instanceId, orgId)).stylesheet;
      if (stylesheet?.hash !== hash) {
        // a page of another process may name a change this one has not heard of yet: read it
        const context = orgId
          ? { type: "org" as const, instanceId, orgId }
          : { type: "instance" as const, instanceId };
        stylesheet = pageBranding(instanceId, orgId, await settingsLayers(db, BRANDING, context)).stylesheet;
      }
      if (stylesheet?.hash !== hash) return notFound(reply);
      return reply.header("cache-control", IMMUTABLE).type("text/css; charset=utf-8").send(stylesheet.body);
    },
  );
}
