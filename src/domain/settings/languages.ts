/**
 * Languages the login UI ships translations for: the system-wide, immutable supported languages.
 * Keep in step with the login UI's message catalogues.
 */
export const supportedLanguages = ["en", "de", "fr", "it"] as const;
export const defaultLanguage = "en";
export const LANGUAGE = "language";
