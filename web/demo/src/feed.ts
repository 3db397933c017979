/**
 * The list a view writes into: verified messages with their authors, the frames that
 * failed verification (marked, never shown as messages), and notes (joins, rosters, gaps).
 *
 * Owns: `Feed` and the markup the tests find it by: `data-testid="message"` (a verified
 * delivery: `data-author`, `data-index`, class `verified`), `"sent"` (this page's own
 * publication), `"insisted"` (a revoked seat's frame written past the library), `"failure"`
 * (class `failed`, text "verification failed: …"; a failure of the same kind right after
 * it adds to its `data-repeat` count, "(×N)", and shows the latest reason, instead of a
 * new line, so a flood of forgeries, varied or not, is one line, not hundreds of layouts)
 * and `"note"`.
 *
 * Never: decides what verified (`verdicts.ts` and the library's `Admission` do).
 */

import { toHex } from "../../src/index.js";
import { element } from "./dom.js";

/** Entries kept on screen; older ones scroll away so a long stream cannot grow the page without bound. */
export const FEED_ENTRIES_MAX = 500;

const decoder = new TextDecoder("utf-8", { fatal: false });

/** A payload as text (invalid UTF-8 shows replacement characters, never markup). */
export function payloadText(payload: Uint8Array): string {
  return decoder.decode(payload);
}

/** `0x` and the address in hex. */
export function addressText(address: Uint8Array): string {
  return `0x${toHex(address)}`;
}

/** The feed of one view (module docs). */
export class Feed {
  readonly root: HTMLOListElement;
  readonly #self: Uint8Array;
  /** The newest entry when it is a failure: its kind and how many times it came. */
  #lastFailure: { entry: HTMLLIElement; kind: string; repeat: number } | undefined;

  constructor(self: Uint8Array) {
    this.#self = self;
    this.root = element("ol", { class: "feed", "data-testid": "feed" });
  }

  /** A delivery the library verified: its recovered author, index and text. */
  message(author: Uint8Array, index: bigint, payload: Uint8Array): void {
    const you = toHex(author) === toHex(this.#self) ? " (you)" : "";
    this.#add(
      element(
        "li",
        { class: "message verified", "data-testid": "message", "data-author": addressText(author), "data-index": index.toString() },
        element("span", { class: "mark", title: "signature and id verified in this page" }, "✓ verified"),
        " ",
        element("span", { class: "author" }, addressText(author) + you),
        " ",
        element("span", { class: "index" }, `#${index}`),
        element("div", { class: "text" }, payloadText(payload)),
      ),
    );
  }

  /** This page's own publication, as written to the stream. */
  sent(index: bigint, payload: Uint8Array): void {
    this.#own("sent", "sent", index, payload);
  }

  /** A revoked seat's publication, written to the stream past the library anyway. */
  insisted(index: bigint, payload: Uint8Array): void {
    this.#own("insisted", "sent anyway, revoked", index, payload);
  }

  #own(testId: string, label: string, index: bigint, payload: Uint8Array): void {
    this.#add(
      element(
        "li",
        { class: `message own ${testId}`, "data-testid": testId, "data-index": index.toString() },
        element("span", { class: "mark" }, label),
        " ",
        element("span", { class: "author" }, `${addressText(this.#self)} (you)`),
        " ",
        element("span", { class: "index" }, `#${index}`),
        element("div", { class: "text" }, payloadText(payload)),
      ),
    );
  }

  /** A delivery that failed verification (`kind`: its reason's code): marked, and its payload is not shown. */
  failure(kind: string, reason: string): void {
    const text = `✗ verification failed: ${reason}`;
    const last = this.#lastFailure;
    if (last !== undefined && last.kind === kind && this.root.lastElementChild === last.entry) {
      last.repeat++;
      last.entry.textContent = `${text} (×${last.repeat})`;
      last.entry.setAttribute("data-repeat", String(last.repeat));
      return;
    }
    const entry = element("li", { class: "failed", "data-testid": "failure", "data-repeat": "1" }, text);
    this.#add(entry);
    this.#lastFailure = { entry, kind, repeat: 1 };
  }

  /** Something that happened to the stream (not a message). */
  note(text: string): void {
    this.#add(element("li", { class: "note", "data-testid": "note" }, text));
  }

  #add(entry: HTMLLIElement): void {
    this.root.append(entry);
    while (this.root.childElementCount > FEED_ENTRIES_MAX) this.root.firstElementChild?.remove();
    entry.scrollIntoView({ block: "nearest" });
  }
}
