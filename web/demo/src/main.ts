/**
 * The demo page's entry: read the URL, ask first when it names another broker than the
 * page's own (`endpointGate.ts`), load this tab's key for the endpoint it connects to,
 * start the verification worker, and start the view it names (`chat.ts`, `liveStream.ts`,
 * `jam.ts`) inside the `#app` element.
 *
 * Owns: the wiring. Never: does a view's work, connects or loads a key before the person
 * agreed to the endpoint, or shows a configuration it could not read as anything but an
 * error (`data-testid="config-error"`).
 */

import { runChat } from "./chat.js";
import { ConfigError, readConfig } from "./config.js";
import { askEndpoint, endpointQuestion } from "./endpointGate.js";
import { loadIdentity } from "./identity.js";
import { runJam } from "./jam.js";
import { keyPanel } from "./keyPanel.js";
import { runLiveStream } from "./liveStream.js";
import { Shell } from "./shell.js";
import { WorkerVerifier } from "./verifier.js";
import type { View } from "./view.js";

const TITLES = { chat: "Group chat", live: "Live stream", jam: "Jam" } as const;

async function start(root: HTMLElement): Promise<void> {
  try {
    const config = readConfig(location.search, location);
    const question = endpointQuestion(config, localStorage);
    if (question !== undefined) await askEndpoint(root, question, withoutEndpoint(location.href));
    const identity = loadIdentity(localStorage, config.identity, config.endpoint, config.home);
    const key = identity.key;
    const role = config.asAdmin ? " (you host)" : "";
    const shell = new Shell(root, `${TITLES[config.view]}: ${config.room}${role}`, key.address);
    shell.aboutKey(keyPanel(identity, location.origin, localStorage, () => location.reload()));
    const verifier = new WorkerVerifier(
      (counts) => shell.verification(counts),
      (detail) => shell.fatal(`verification stopped: ${detail}`),
    );
    const view: View = { shell, config, key, storage: localStorage, verifier };
    if (config.view === "chat") runChat(view);
    if (config.view === "live") runLiveStream(view);
    if (config.view === "jam") runJam(view);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    const message = document.createElement("p");
    message.setAttribute("data-testid", "config-error");
    message.className = "fatal";
    message.textContent = `cannot start: ${error.message}`;
    root.replaceChildren(message);
  }
}

/** The same page without its `ws` parameter: the same view on the page's own broker. */
function withoutEndpoint(href: string): string {
  const url = new URL(href);
  url.searchParams.delete("ws");
  return url.toString();
}

const root = document.getElementById("app");
if (root !== null) void start(root);
