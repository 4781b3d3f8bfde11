/**
 * Text settings: the texts of the login UI and of the messages that administrators override, one
 * settings category per language (`texts.de`), each value keyed by its text key (`login.password.title`)
 * and holding the text as the API takes it (plain text with `{{.Name}}` placeholders; src/texts/format.ts
 * turns it into the ICU message the renderers format).
 */
export const TEXTS_PREFIX = "texts.";

/** The settings category of the texts of one language. */
export const textsCategory = (language: string): string => `${TEXTS_PREFIX}${language}`;
