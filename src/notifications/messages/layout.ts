/**
 * The two forms of an e-mail: HTML through an eta template (./templates/email.eta; autoEscape, so every
 * `<%= %>` value is HTML-escaped, as in the login UI) and plain text. The HTML is a table layout with
 * inline styles only (what e-mail clients render), readable without images: the logo is optional and has
 * the instance's name as its alternative text; without a logo the name is written out.
 *
 * Branding (the organization's colours and logo) is optional. Colours are taken only as `#rgb` or
 * `#rrggbb`, and the logo only as an http(s) URL: they land in style and src attributes, where escaping
 * alone would not stop `red;background:url(…)`. Anything else falls back to the default. The button's
 * text is white or dark, whichever contrasts more with the primary colour; the link written out takes
 * the primary colour only where it reads on the background (WCAG AA, 4.5:1), else the text's colour.
 */
import path from "node:path";
import { Eta } from "eta";

const eta = new Eta({
  views: path.join(import.meta.dirname, "templates"),
  autoEscape: true,
  cache: true,
  autoTrim: [false, "nl"],
});

export interface Branding {
  /** The button and links. */
  primaryColor?: string;
  /** The message's card. */
  backgroundColor?: string;
  /** The text. */
  fontColor?: string;
  /** An http(s) URL of the logo image, shown at 40 px high. */
  logoUrl?: string;
}

/** The login UI's colours (src/login/assets/login.css). */
export const DEFAULT_BRANDING = {
  primaryColor: "#2553d8",
  backgroundColor: "#ffffff",
  fontColor: "#111827",
} as const;

const PAGE_COLOR = "#f3f4f6";
const BORDER_COLOR = "#e5e7eb";
const MUTED_COLOR = "#4b5563";

/** `#rgb` / `#rrggbb` as lower-case `#rrggbb`, else undefined. */
export function normalColor(value: string | undefined): string | undefined {
  const match = value && /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(value.trim());
  if (!match) return undefined;
  const hex = match[1].toLowerCase();
  return `#${hex.length === 3 ? [...hex].map((c) => c + c).join("") : hex}`;
}

/** An http(s) URL as the URL parser writes it, else undefined. */
export function normalLogoUrl(value: string | undefined): string | undefined {
  if (!value) return undefined;
  try {
    const url = new URL(value);
    return url.protocol === "https:" || url.protocol === "http:" ? url.href : undefined;
  } catch {
    return undefined;
  }
}

/** WCAG relative luminance of `#rrggbb`. */
function luminance(color: string): number {
  const [r, g, b] = [1, 3, 5].map((i) => {
    const c = Number.parseInt(color.slice(i, i + 2), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/** The WCAG contrast ratio of two `#rrggbb` colours (1 to 21). */
export function contrast(a: string, b: string): number {
  const [light, dark] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (light + 0.05) / (dark + 0.05);
}

/** The colours and logo the template uses, from the branding given (or the defaults). */
export function resolveBranding(branding: Branding | undefined) {
  const primary = normalColor(branding?.primaryColor) ?? DEFAULT_BRANDING.primaryColor;
  const font = normalColor(branding?.fontColor);
  const dark = DEFAULT_BRANDING.fontColor;
  const background = normalColor(branding?.backgroundColor) ?? DEFAULT_BRANDING.backgroundColor;
  return {
    primary,
    onPrimary: contrast(primary, "#ffffff") >= contrast(primary, dark) ? "#ffffff" : dark,
    link: contrast(primary, background) >= 4.5 ? primary : (font ?? DEFAULT_BRANDING.fontColor),
    background,
    font: font ?? DEFAULT_BRANDING.fontColor,
    muted: font ?? MUTED_COLOR,
    page: PAGE_COLOR,
    border: BORDER_COLOR,
    logoUrl: normalLogoUrl(branding?.logoUrl),
  };
}

/** The texts of an e-mail, formatted, and its link. */
export interface EmailContent {
  lang: string;
  subject: string;
  title: string;
  greeting: string;
  text: string;
  footer: string;
  /** The sender named at the top (the instance). */
  senderName: string;
  link?: { url: string; button: string; hint: string };
  /** The one-time code: a paragraph of the text that is just the code is set large, to be read off. */
  code?: string;
}

/** Paragraphs (separated by a blank line) of lines. */
const paragraphs = (text: string): string[][] =>
  text
    .split(/\r?\n\s*\r?\n/)
    .map((paragraph) => paragraph.split(/\r?\n/).map((line) => line.trim()))
    .filter((lines) => lines.some(Boolean));

export function emailHtml(content: EmailContent, branding: Branding | undefined): string {
  return eta.render("email", {
    ...content,
    paragraphs: paragraphs(content.text).map((lines) => ({
      lines,
      code: content.code !== undefined && lines.length === 1 && lines[0] === content.code,
    })),
    footerParagraphs: paragraphs(content.footer),
    colors: resolveBranding(branding),
  });
}

/** The plain-text part: greeting, text, the link under its button's label, footer ("\n" line ends). */
export function emailText(content: EmailContent): string {
  const blocks = [content.greeting, content.text.trim()];
  if (content.link) blocks.push(`${content.link.button}\n${content.link.url}`);
  blocks.push(`--\n${content.footer.trim()}`);
  return `${blocks.join("\n\n")}\n`;
}
