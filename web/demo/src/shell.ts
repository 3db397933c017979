/**
 * The frame every view fills in: a title, this tab's address and its key panel, the
 * stream's status and role, what the verification worker did, links to share, controls, a
 * compose box and the feed.
 *
 * Owns: `Shell` and its stable test hooks: `data-testid` `my-address`, `status`, `role`,
 * `verify-stats` (its counters also as `data-*` attributes, redrawn at most every
 * `STATS_REDRAW_MS`), `compose-text`, `send`, and whatever ids a view gives its links and
 * controls.
 *
 * Never: talks to the network or decides what a status means (the views do).
 */

import { element } from "./dom.js";
import { Feed, addressText } from "./feed.js";
import type { VerifierCounts } from "./verifier.js";

/** Shortest time between two redraws of the verification counters: a flood changes them thousands of times a second. */
export const STATS_REDRAW_MS = 250;

/**
 * Characters one message may have: a chat line, and even in 4-byte UTF-8 it stays under a
 * chunk's 4096-byte payload, so the compose box cannot make a publication the library refuses.
 */
export const COMPOSE_CHARS_MAX = 1000;

/** The page of one view (module docs). */
export class Shell {
  readonly feed: Feed;
  readonly #status: HTMLElement;
  readonly #role: HTMLElement;
  readonly #controls: HTMLElement;
  readonly #identity: HTMLElement;
  readonly #stats: HTMLElement;
  #counts: VerifierCounts | undefined;
  #redraw: ReturnType<typeof setTimeout> | undefined;

  constructor(root: HTMLElement, title: string, self: Uint8Array) {
    this.feed = new Feed(self);
    this.#status = element("span", { "data-testid": "status", class: "status" }, "connecting");
    this.#role = element("span", { "data-testid": "role", class: "role" }, "");
    this.#controls = element("div", { class: "controls" });
    this.#stats = element("p", { class: "stats", "data-testid": "verify-stats" }, "verification: starting the worker");
    this.#identity = element(
      "div",
      { class: "identity" },
      element(
        "p",
        {},
        "you are ",
        element("code", { "data-testid": "my-address" }, addressText(self)),
        " (a key made and kept in this browser)",
      ),
    );
    root.replaceChildren(
      element("h1", {}, title),
      this.#identity,
      element("p", { class: "state" }, "stream: ", this.#status, " ", this.#role),
      this.#stats,
      this.#controls,
      this.feed.root,
    );
  }

  /** Where the key lives, under the address. */
  aboutKey(panel: Node): void {
    this.#identity.append(panel);
  }

  /** The verification counters; drawn at most every `STATS_REDRAW_MS`. */
  verification(counts: VerifierCounts): void {
    this.#counts = counts;
    if (this.#redraw === undefined) this.#redraw = setTimeout(() => this.#drawStats(), STATS_REDRAW_MS);
  }

  #drawStats(): void {
    this.#redraw = undefined;
    const counts = this.#counts;
    if (counts === undefined) return;
    const dropped = counts.droppedFull + counts.droppedLate;
    this.#stats.textContent =
      `verification in a worker: ${counts.checkedInWorker} checked, ${counts.pending} waiting; ` +
      `dropped unverified: ${dropped} (${counts.droppedFull} while the queue was full, ${counts.droppedLate} too late)` +
      (counts.checkedOnPage === 0 ? "" : `; checked on the page: ${counts.checkedOnPage} (this page's own rosters)`);
    this.#stats.classList.toggle("dropping", dropped > 0);
    const attributes: Record<string, number> = {
      "data-in-worker": counts.checkedInWorker,
      "data-on-page": counts.checkedOnPage,
      "data-delivered": counts.delivered,
      "data-dropped-full": counts.droppedFull,
      "data-dropped-late": counts.droppedLate,
      "data-pending": counts.pending,
    };
    for (const [name, value] of Object.entries(attributes)) this.#stats.setAttribute(name, String(value));
  }

  /** The stream's state in words. */
  status(text: string): void {
    this.#status.textContent = text;
  }

  /** The publishing role on the current stream. */
  role(text: string): void {
    this.#role.textContent = text === "" ? "" : `role: ${text}`;
  }

  /** A link to give someone (an invite, the viewer's URL). */
  link(label: string, href: string, testId: string): void {
    this.#controls.append(element("p", {}, `${label}: `, element("a", { href, "data-testid": testId }, href)));
  }

  /** Any other control row of a view. */
  controls(...nodes: Node[]): void {
    this.#controls.append(...nodes);
  }

  /** A text box and a button; `onSend` gets the text, and the box empties. */
  compose(placeholder: string, onSend: (text: string) => void): void {
    const input = element("input", { type: "text", placeholder, "data-testid": "compose-text", maxlength: String(COMPOSE_CHARS_MAX) });
    const button = element("button", { type: "submit", "data-testid": "send" }, "send");
    const form = element("form", { class: "compose" }, input, button);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const text = input.value;
      if (text === "") return;
      input.value = "";
      onSend(text);
    });
    this.#controls.append(form);
  }

  /** A problem the page cannot go on with (a bad URL, a refused Join). */
  fatal(text: string): void {
    this.#status.textContent = text;
    this.#status.classList.add("fatal");
  }
}
