/**
 * GET /ui/login/language?lang=<lang>&return=<page>: the language picker's links (../language-picker.ts).
 * Keeps a supported language in the `platform_lang` cookie and sends the browser back to `return` when it
 * is a page of the login UI or the account page, else to the login-name page. A GET, so that the picker
 * works as plain links; it changes nothing but the browser's own cookie.
 */
import type { FastifyInstance } from "fastify";
import { supportedLanguages } from "../../domain/settings/languages.ts";
import { returnable, setPickedLanguage } from "../language-picker.ts";
import type { Query, StepKit } from "./kit.ts";

const supported = new Set<string>(supportedLanguages);

export function languageStep(ui: FastifyInstance, kit: StepKit): void {
  ui.get<{ Querystring: Query }>("/login/language", async (request, reply) => {
    const lang = typeof request.query.lang === "string" ? request.query.lang : "";
    const target = typeof request.query.return === "string" ? request.query.return : "";
    if (supported.has(lang)) setPickedLanguage(request, reply, lang, kit.login.deps.config.externalSecure);
    return reply.redirect(returnable(target) ? target : "/ui/login/loginname", 302);
  });
}
