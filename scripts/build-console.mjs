// The administration console's bundle (docs/console.md): console/src/ bundled by esbuild into
// `<outDir>` (dist/console-ui/ in a build): ES modules split per screen (`splitting`), minified, every file
// but index.html named by its content hash (`assets/main-<hash>.js`, `assets/chunks/<name>-<hash>.js`), so
// the server can let browsers cache them for good. index.html names the entry script and stylesheet; it has
// no inline script (the console's Content-Security-Policy allows scripts from 'self' only).
// scripts/build.mjs calls it for every build and fingerprints console/ with src/.
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";

export const consoleRoot = path.resolve(import.meta.dirname, "..", "console");
/** The output folder's name inside dist/ (src/server/console.ts serves it). */
export const consoleOutName = "console-ui";
/** What index.html, config.json and the assets are served under. */
const base = "/ui/console";

/** Paths (relative to the package root, sorted) of the files the console's bundle is made from. */
export function consoleSourceFiles() {
  const walk = (dir) =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const full = path.join(dir, entry.name);
      return entry.isDirectory() ? walk(full) : entry.isFile() ? [full] : [];
    });
  return [...walk(path.join(consoleRoot, "src")), path.join(consoleRoot, "tsconfig.json")]
    .map((file) => path.relative(path.dirname(consoleRoot), file))
    .sort();
}

/** Bundles the console into `outDir`; answers the files written with their sizes (bytes). */
export async function buildConsole(outDir) {
  const esbuild = await import("esbuild");
  const result = await esbuild.build({
    absWorkingDir: path.dirname(consoleRoot),
    entryPoints: { main: path.join(consoleRoot, "src", "main.tsx") },
    outdir: path.join(outDir, "assets"),
    publicPath: `${base}/assets`,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "browser",
    target: ["es2022"],
    minify: true,
    sourcemap: false,
    legalComments: "none",
    entryNames: "[name]-[hash]",
    chunkNames: "chunks/[name]-[hash]",
    assetNames: "[name]-[hash]",
    jsx: "automatic",
    jsxImportSource: "preact",
    tsconfig: path.join(consoleRoot, "tsconfig.json"),
    metafile: true,
    logLevel: "error",
  });
  const outputs = Object.entries(result.metafile.outputs);
  const entry = outputs.find(([, o]) => o.entryPoint?.endsWith("main.tsx"));
  if (!entry) throw new Error("esbuild produced no entry script for console/src/main.tsx");
  const url = (file) =>
    `${base}/assets/${path
      .relative(path.join(outDir, "assets"), path.join(path.dirname(consoleRoot), file))
      .split(path.sep)
      .join("/")}`;
  const css = entry[1].cssBundle;
  const html = [
    "<!doctype html>",
    '<html lang="en">',
    "<head>",
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    "<title>Platform Console</title>",
    '<link rel="icon" href="data:,">',
    css ? `<link rel="stylesheet" href="${url(css)}">` : "",
    `<script type="module" src="${url(entry[0])}"></script>`,
    "</head>",
    '<body><div id="app"><p class="loading">Loading the console…</p></div></body>',
    "</html>",
    "",
  ]
    .filter(Boolean)
    .join("\n");
  mkdirSync(outDir, { recursive: true });
  writeFileSync(path.join(outDir, "index.html"), html);
  return Object.fromEntries(outputs.map(([file, o]) => [file, o.bytes]));
}
