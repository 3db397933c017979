/**
 * Paths the end-to-end tests share: the repository root, the web package, the built demo.
 *
 * Owns: `repoPath`, `webPath`, `DEMO_DIST`. Never: builds anything (`web/scripts/e2e` does).
 */

import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const web = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** A path inside the web package. */
export function webPath(relative: string): string {
  return resolve(web, relative);
}

/** A path inside the repository. */
export function repoPath(relative: string): string {
  return resolve(web, "..", relative);
}

/** The built demo page (`npm run build:demo`). */
export const DEMO_DIST = webPath("demo/dist");
