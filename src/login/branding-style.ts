/**
 * The stylesheet of a branding (docs/branding.md "Login UI"): the login's custom properties
 * (./assets/login.css) set from the branding colours, linked after login.css. The page CSP allows styles
 * from this origin only (`style-src 'self'`), so the colours come as a stylesheet of their own, served with
 * its content hash in the URL (./branding.ts), never as inline styles.
 *
 * Contrast: text must read on its background (WCAG AA, 4.5:1). A colour shown as text (the font colour,
 * the primary colour of links, the warn colour of errors) that has less against the background is moved
 * toward black or white, whichever contrasts more with the background, by the smallest step that reaches
 * 4.5:1 (black or white themselves always reach it). A button's text is white or near-black, whichever
 * contrasts more with the primary colour. The settings keep the colours as set; only the page adjusts.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import type { ColorKey, ThemeMode } from "../domain/settings/branding.ts";

export const MIN_CONTRAST = 4.5;

const channels = (color: string) => [1, 3, 5].map((i) => Number.parseInt(color.slice(i, i + 2), 16));
const hex = (rgb: number[]) => `#${rgb.map((c) => Math.round(c).toString(16).padStart(2, "0")).join("")}`;

/** WCAG relative luminance of `#rrggbb`. */
function luminance(color: string): number {
  const [r, g, b] = channels(color).map((c) => {
    const s = c / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/** The WCAG contrast ratio of two `#rrggbb` colours (1 to 21). */
export function contrast(a: string, b: string): number {
  const [light, dark] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (light + 0.05) / (dark + 0.05);
}

/** `a` with `share` (0 to 1) of `b` mixed in, per sRGB channel. */
export function mix(a: string, b: string, share: number): string {
  const [x, y] = [channels(a), channels(b)];
  return hex(x.map((c, i) => c + (y[i] - c) * share));
}

/** `color`, or the nearest colour toward black or white that reads on `background` (4.5:1). */
export function readableOn(color: string, background: string): string {
  if (contrast(color, background) >= MIN_CONTRAST) return color;
  const target = contrast("#000000", background) >= contrast("#ffffff", background) ? "#000000" : "#ffffff";
  // the contrast grows with the share of the target: the smallest share that reaches 4.5:1, in 1/64 steps
  for (let step = 1; step <= 64; step++) {
    const candidate = mix(color, target, step / 64);
    if (contrast(candidate, background) >= MIN_CONTRAST) return candidate;
  }
  return target;
}

/** The four colours of one scheme. */
export interface Palette {
  primary: string;
  background: string;
  warn: string;
  font: string;
}

/** The custom properties of login.css a palette decides. */
export function paletteVariables(palette: Palette): Record<string, string> {
  const { primary, background } = palette;
  const text = readableOn(palette.font, background);
  const darkText = "#111827";
  const accent = readableOn(primary, background);
  const warn = readableOn(palette.warn, background);
  const mutedCandidate = mix(text, background, 0.25);
  return {
    "--bg": mix(background, text, 0.04),
    "--card": background,
    "--text": text,
    "--muted": contrast(mutedCandidate, background) >= MIN_CONTRAST ? mutedCandidate : text,
    "--border": mix(background, text, 0.14),
    "--input-border": mix(background, text, 0.5),
    "--input-bg": background,
    "--accent": accent,
    "--accent-hover": mix(accent, text, 0.2),
    "--accent-text": contrast(accent, "#ffffff") >= contrast(accent, darkText) ? "#ffffff" : darkText,
    "--accent-soft": mix(background, accent, 0.12),
    "--danger": warn,
    "--danger-bg": mix(background, warn, 0.08),
    "--danger-border": mix(background, warn, 0.4),
    "--focus": accent,
  };
}

/** The custom properties login.css sets in its light (`:root`) and dark (`prefers-color-scheme`) blocks. */
export const BASE_VARIABLES = (() => {
  const css = readFileSync(path.join(import.meta.dirname, "assets", "login.css"), "utf8");
  const variables = (block: string) =>
    Object.fromEntries([...block.matchAll(/(--[a-z-]+):\s*([^;]+);/g)].map((m) => [m[1], m[2].trim()]));
  const light = /:root\s*\{([^}]*)\}/.exec(css)?.[1] ?? "";
  const dark = /@media \(prefers-color-scheme: dark\)\s*\{\s*:root\s*\{([^}]*)\}/.exec(css)?.[1] ?? "";
  return { light: variables(light), dark: variables(dark) };
})();

export interface StyleInput {
  colors: Record<ColorKey, string>;
  /** The colours some context sets (the others are the defaults). */
  customized: Set<ColorKey>;
  themeMode: ThemeMode;
}

const paletteOf = (colors: Record<ColorKey, string>, suffix: "" | "_dark"): Palette => ({
  primary: colors[`primary_color${suffix}`],
  background: colors[`background_color${suffix}`],
  warn: colors[`warn_color${suffix}`],
  font: colors[`font_color${suffix}`],
});

const block = (selector: string, declarations: Record<string, string>) =>
  `${selector} {\n${Object.entries(declarations)
    .map(([name, value]) => `  ${name}: ${value};\n`)
    .join("")}}\n`;

/**
 * The stylesheet of a branding, or undefined when it changes nothing (no colour set, theme mode auto).
 * A scheme none of whose colours is set keeps login.css's; a forced mode (light, dark) sets that scheme's
 * properties at `:root:root`, which outranks login.css's `prefers-color-scheme` block.
 */
export function brandingStylesheet(input: StyleInput): string | undefined {
  const schemes = (["light", "dark"] as const).map((scheme) => {
    const suffix = scheme === "dark" ? "_dark" : "";
    const customized = [...input.customized].some((key) => key.endsWith("_dark") === (scheme === "dark"));
    const variables = customized
      ? { ...BASE_VARIABLES[scheme], ...paletteVariables(paletteOf(input.colors, suffix)) }
      : BASE_VARIABLES[scheme];
    return { scheme, customized, variables };
  });
  const [light, dark] = schemes;
  if (input.themeMode === "auto") {
    if (!light.customized && !dark.customized) return undefined;
    let css = "/* branding */\n";
    if (light.customized)
      css += `@media not (prefers-color-scheme: dark) {\n${block(":root", light.variables)}}\n`;
    if (dark.customized) css += `@media (prefers-color-scheme: dark) {\n${block(":root", dark.variables)}}\n`;
    return css;
  }
  const forced = input.themeMode === "light" ? light : dark;
  return `/* branding */\n${block(":root:root", { "color-scheme": forced.scheme, ...forced.variables })}`;
}
