/**
 * The question a link to another broker asks first: a page opened with `?ws=` naming an
 * endpoint other than its own broker's shows both endpoints, which key would be used there
 * (the one already bound to that endpoint, or a fresh one made for it) and that the key of
 * its own broker stays where it is; nothing connects and no key is loaded or made until the
 * person continues. "Stay" opens the same view on the page's own broker.
 *
 * Owns: `EndpointQuestion`, `endpointQuestion` (what to ask, no DOM) and `askEndpoint`
 * (the panel: `data-testid` `endpoint-confirm`, `confirm-endpoint`, `confirm-home`,
 * `confirm-key`, `endpoint-continue`, `endpoint-stay`).
 *
 * Never: makes, changes or uses a key (it only looks up which addresses are stored).
 */

import type { DemoConfig } from "./config.js";
import { element } from "./dom.js";
import { addressText } from "./feed.js";
import { findIdentity } from "./identity.js";

/** What the page must ask before it connects (module docs). */
export interface EndpointQuestion {
  /** The endpoint the link names. */
  readonly endpoint: string;
  /** The page's own broker's endpoint. */
  readonly home: string;
  /** The address of the key already bound to `endpoint`; none: a fresh key is made. */
  readonly endpointKey: string | undefined;
  /** The address of the key bound to `home`, which is not used there. */
  readonly homeKey: string | undefined;
}

/** The question for `config`, or `undefined` when the page connects to its own broker. */
export function endpointQuestion(config: DemoConfig, storage: Storage): EndpointQuestion | undefined {
  if (config.endpoint === config.home) return undefined;
  const address = (endpoint: string) => {
    const found = findIdentity(storage, config.identity, endpoint);
    return found === undefined ? undefined : addressText(found.key.address);
  };
  return { endpoint: config.endpoint, home: config.home, endpointKey: address(config.endpoint), homeKey: address(config.home) };
}

/** Shows `question` in `root`; resolves when the person continues (module docs). */
export function askEndpoint(root: HTMLElement, question: EndpointQuestion, stayHref: string): Promise<void> {
  return new Promise((resolve) => {
    const which =
      question.endpointKey === undefined
        ? "a new key, made in this browser for that endpoint only"
        : `your key ${question.endpointKey}, made earlier for that endpoint`;
    const proceed = element("button", { type: "button", "data-testid": "endpoint-continue" }, "connect there");
    proceed.addEventListener("click", () => resolve());
    root.replaceChildren(
      element(
        "section",
        { class: "confirm", "data-testid": "endpoint-confirm" },
        element("h1", {}, "Connect to another broker?"),
        element(
          "p",
          {},
          "This link connects to ",
          element("code", { "data-testid": "confirm-endpoint" }, question.endpoint),
          ", not to ",
          element("code", { "data-testid": "confirm-home" }, question.home),
          ", the broker that served this page. Whoever runs that endpoint sees what you publish there, and when you are there.",
        ),
        element("p", { "data-testid": "confirm-key" }, `There you would sign with ${which}. `, homeLine(question)),
        element(
          "p",
          { class: "choices" },
          proceed,
          " ",
          element("a", { href: stayHref, "data-testid": "endpoint-stay" }, "stay on this page's broker"),
        ),
      ),
    );
  });
}

function homeLine(question: EndpointQuestion): string {
  return question.homeKey === undefined
    ? "You have no key for this page's broker yet."
    : `Your key for this page's broker, ${question.homeKey}, stays bound to it and is not used there.`;
}
