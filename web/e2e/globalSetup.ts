/**
 * Vitest's global setup for the end-to-end tests: one real broker for the whole run,
 * started before the first test file and stopped after the last; its addresses reach
 * every test through `inject("broker")`.
 *
 * Owns: the broker's lifetime. Never: builds the demo or the binaries (the script does).
 */

import { existsSync } from "node:fs";
import { join } from "node:path";
import type { TestProject } from "vitest/node";

import { type BrokerAddresses, startBroker } from "./broker.js";
import { DEMO_DIST } from "./paths.js";

declare module "vitest" {
  export interface ProvidedContext {
    broker: BrokerAddresses;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (!existsSync(join(DEMO_DIST, "index.html"))) throw new Error(`no demo page in ${DEMO_DIST}: run \`npm run build:demo\``);
  const broker = await startBroker(DEMO_DIST);
  project.provide("broker", { tcp: broker.tcp, admin: broker.admin, ws: broker.ws });
  return () => broker.stop();
}
