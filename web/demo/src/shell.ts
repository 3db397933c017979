/**
 * The frame every view fills in: a title, this tab's address, the stream's status and
 * role, links to share, controls, a compose box and the feed.
 *
 * Owns: `Shell` and its stable test hooks: `data-testid` `my-address`, `status`, `role`,
 * `compose-text`, `send`, and whatever ids a view gives its links and controls.
 *
 * Never: talks to the network or decides what a status means (the views do).
 */

import { element } from "./dom.js";
import { Feed, addressText } from "./feed.js";

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

  constructor(root: HTMLElement, title: string, self: Uint8Array) {
    this.feed = new Feed(self);
    this.#status = element("span", { "data-testid": "status", class: "status" }, "connecting");
    this.#role = element("span", { "data-testid": "role", class: "role" }, "");
    this.#controls = element("div", { class: "controls" });
    root.replaceChildren(
      element("h1", {}, title),
      element(
        "p",
        { class: "identity" },
        "you are ",
        element("code", { "data-testid": "my-address" }, addressText(self)),
        " (a key made and kept in this browser)",
      ),
      element("p", { class: "state" }, "stream: ", this.#status, " ", this.#role),
      this.#controls,
      this.feed.root,
    );
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
