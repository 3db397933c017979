/**
 * The implicit-authorship dedup window (R28 mirrored on the client): the keys of the most
 * recently accepted chunks (chunk address, or the wrapped CAC under ANCHOR), bounded,
 * oldest forgotten first. Replay of a forgotten chunk is the accepted risk of R28.
 *
 * Owns: `DedupWindow` (insert-if-new with first-in-first-out forgetting).
 *
 * Never: persists (it lives as long as its subscriber, across reconnects) or computes keys
 * (`shape.ts` does).
 */

import { toHex } from "./bytes.js";

/** A bounded set of recently seen keys (module docs). */
export class DedupWindow {
  readonly #max: number;
  // Insertion order is arrival order, so the first key is the oldest.
  readonly #seen = new Set<string>();

  constructor(max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`dedup window of ${max} entries`);
    this.#max = max;
  }

  /** Keys held. */
  get size(): number {
    return this.#seen.size;
  }

  /** Records `key`; `false` if it was already in the window. */
  insert(key: Uint8Array): boolean {
    const hex = toHex(key);
    if (this.#seen.has(hex)) return false;
    this.#seen.add(hex);
    if (this.#seen.size > this.#max) {
      const oldest = this.#seen.values().next().value as string;
      this.#seen.delete(oldest);
    }
    return true;
  }
}
