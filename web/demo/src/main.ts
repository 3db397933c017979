/**
 * The demo page's entry: read the URL, load this tab's key, and start the view it names
 * (`chat.ts`, `liveStream.ts`, `jam.ts`) inside the `#app` element.
 *
 * Owns: the wiring. Never: does a view's work, or shows a configuration it could not read
 * as anything but an error (`data-testid="config-error"`).
 */

import { runChat } from "./chat.js";
import { ConfigError, readConfig } from "./config.js";
import { loadIdentity } from "./identity.js";
import { runJam } from "./jam.js";
import { runLiveStream } from "./liveStream.js";
import { Shell } from "./shell.js";

const TITLES = { chat: "Group chat", live: "Live stream", jam: "Jam" } as const;

function start(root: HTMLElement): void {
  try {
    const config = readConfig(location.search, location);
    const key = loadIdentity(localStorage, config.identity);
    const role = config.asAdmin ? " (you host)" : "";
    const shell = new Shell(root, `${TITLES[config.view]}: ${config.room}${role}`, key.address);
    if (config.view === "chat") runChat(shell, config, key, localStorage);
    if (config.view === "live") runLiveStream(shell, config, key, localStorage);
    if (config.view === "jam") runJam(shell, config, key, localStorage);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    const message = document.createElement("p");
    message.setAttribute("data-testid", "config-error");
    message.className = "fatal";
    message.textContent = `cannot start: ${error.message}`;
    root.replaceChildren(message);
  }
}

const root = document.getElementById("app");
if (root !== null) start(root);
