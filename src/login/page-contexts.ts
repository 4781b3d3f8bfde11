/**
 * What every login page needs of the settings (`pageContext`): the language (the
 * picked one, ui_locales, Accept-Language, the default, as the language settings allow), the texts
 * administrators set and the branding, all from the cached settings layers (./settings-cache.ts). Whose
 * texts and branding: the sign-in's organization's, else as the project of the sign-in's application says
 * (its `private_labeling_setting`, ./labeling.ts): the user's once known, else the instance's (the
 * default), or the project's organization's.
 */
import type { FastifyRequest } from "fastify";
import { textsCategory } from "../domain/settings/texts.ts";
import type { InstanceInfo } from "../query/instances.ts";
import type { SettingsLayer } from "../query/settings.ts";
import { loginOverrides } from "../texts/overrides.ts";
import type { AuthRequest } from "./auth-requests.ts";
import { brandingOf, type PageBranding } from "./branding.ts";
import {
  chooseLanguage,
  type LanguageChoice,
  languageSettings,
  type Translator,
  translator,
  withOverrides,
} from "./i18n.ts";
import { type ClientLabelingCache, type PageLabel, pageLabel } from "./labeling.ts";
import { languageLinks, pickedLanguage, returnTarget } from "./language-picker.ts";
import type { PageContext } from "./render.ts";
import type { SettingsLayerCache } from "./settings-cache.ts";

/** What the pages need of the login: the request's instance. */
export interface InstanceOfRequest {
  instanceId(request: FastifyRequest): string;
  instance(request: FastifyRequest): Promise<InstanceInfo>;
}

export class PageContexts {
  /**
   * The translators with administrators' texts, by the cached text layers they were made from: a change
   * of texts makes new layers (the cache drops the old ones), so each set is compiled once.
   */
  private readonly textTranslators = new WeakMap<SettingsLayer[], Translator>();

  constructor(
    private readonly settings: SettingsLayerCache,
    private readonly login: InstanceOfRequest,
    private readonly labeling: ClientLabelingCache,
  ) {}

  /**
   * Whose branding, texts and language settings the pages of a sign-in show (./labeling.ts): the auth
   * request's organization, else by the `private_labeling_setting` of its application's project and
   * `userOrgId` (the organization of the user the page is for, once known).
   */
  async label(instanceId: string, authRequest?: AuthRequest, userOrgId?: string): Promise<PageLabel> {
    const project =
      authRequest?.clientId && !authRequest.orgId
        ? await this.labeling.of(instanceId, authRequest.clientId)
        : undefined;
    return pageLabel(authRequest?.orgId, project, userOrgId);
  }

  /** The branding of the organization's pages (or the instance's), cached until the settings change. */
  branding(instanceId: string, orgId: string | undefined): Promise<PageBranding> {
    return brandingOf(this.settings, instanceId, orgId);
  }

  /**
   * The language and texts for a request (the picked language, ui_locales of the auth request or
   * `uiLocales` of a request not stored, Accept-Language, default), with the texts administrators set
   * for the sign-in's organization (the auth request's), else the instance.
   */
  async translatorFor(
    request: FastifyRequest,
    authRequest?: AuthRequest,
    uiLocales?: string[],
  ): Promise<Translator> {
    return (await this.languageOf(request, authRequest, uiLocales)).translator;
  }

  /** The languages the instance (or `orgId`) allows. */
  async allowedLanguages(request: FastifyRequest, orgId?: string): Promise<readonly string[]> {
    const instanceId = this.login.instanceId(request);
    const choice = await languageSettings(
      (category, context) => this.settings.layers(category, context),
      instanceId,
      orgId,
    );
    return choice.allowed;
  }

  /**
   * The language (by the language settings of the label's `languageOrgId`, else the instance's) and its
   * translator with the texts of the label's organization, else the instance's.
   */
  private async languageOf(
    request: FastifyRequest,
    authRequest?: AuthRequest,
    uiLocales?: string[],
    label?: PageLabel,
  ): Promise<{ choice: LanguageChoice; translator: Translator }> {
    const instanceId = this.login.instanceId(request);
    const { orgId, languageOrgId } = label ?? (await this.label(instanceId, authRequest));
    const choice = await languageSettings(
      (category, context) => this.settings.layers(category, context),
      instanceId,
      languageOrgId,
    );
    const acceptLanguage = request.headers["accept-language"];
    const lang = chooseLanguage(
      choice,
      authRequest?.uiLocales ?? uiLocales ?? [],
      typeof acceptLanguage === "string" ? acceptLanguage : undefined,
      pickedLanguage(request),
    );
    return { choice, translator: await this.textsTranslator(instanceId, orgId, lang) };
  }

  /** The translator of `lang` with the texts set for the organization (else the instance). */
  private async textsTranslator(instanceId: string, orgId: string | undefined, lang: string) {
    const context = orgId
      ? { type: "org" as const, instanceId, orgId }
      : { type: "instance" as const, instanceId };
    const layers = await this.settings.layers(textsCategory(lang), context);
    if (layers.length === 0) return translator(lang);
    let made = this.textTranslators.get(layers);
    if (!made) {
      const overrides = loginOverrides(layers);
      made = Object.keys(overrides).length ? withOverrides(translator(lang), overrides) : translator(lang);
      this.textTranslators.set(layers, made);
    }
    return made;
  }

  /**
   * What every page needs. Its branding and texts are the label's (`label`): the sign-in's organization's
   * (the auth request's), else as its application's project says, with `userOrgId` the organization of
   * the user the page is for, once known.
   */
  async pageContext(
    request: FastifyRequest,
    options: { authRequest?: AuthRequest; csrf?: string; uiLocales?: string[]; userOrgId?: string } = {},
  ): Promise<PageContext> {
    const { authRequest } = options;
    const instanceId = this.login.instanceId(request);
    const label = await this.label(instanceId, authRequest, options.userOrgId);
    const [language, instance, branding] = await Promise.all([
      this.languageOf(request, authRequest, options.uiLocales, label),
      this.login.instance(request),
      this.branding(instanceId, label.orgId),
    ]);
    return {
      translator: language.translator,
      instanceName: instance.name,
      branding,
      formTargets: authRequest?.clientId ? [authRequest.redirectUri] : [],
      csrf: options.csrf,
      authRequestId: authRequest?.id,
      allowedLanguages: language.choice.allowed,
      languages: languageLinks(
        language.choice.allowed,
        language.translator.lang,
        returnTarget(request, authRequest?.id),
      ),
    };
  }
}
