// Builds the demo page into demo/dist/ (gitignored), which the broker serves from
// ws.static_dir: main.ts and the library bundled into one ES module with esbuild, the
// verification worker (verifyWorker.ts, started by the page from its own origin) into a
// second one beside it, and the static files copied beside them. Run by `npm run build:demo` after `npm run generate`
// (the bundle needs the generated wire types). Never minifies: the demo is meant to be read.
import { copyFile, mkdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "dist");
const STATIC_FILES = ["index.html", "style.css"];

await rm(out, { recursive: true, force: true });
await mkdir(out, { recursive: true });
await build({
  entryPoints: [join(here, "src", "main.ts"), join(here, "src", "verifyWorker.ts")],
  outdir: out,
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  sourcemap: true,
  logLevel: "warning",
});
for (const file of STATIC_FILES) await copyFile(join(here, file), join(out, file));
console.log(`demo built in ${out}`);
