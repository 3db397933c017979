/**
 * The per-publisher DATA cursors of one cohort (R27 mirrored on the client, R41; under
 * implicit FEED_TOPIC the feed's writers): the next index expected from each owner, bounded,
 * least recently used evicted.
 *
 * Owns: `CursorTable` (get, advance with the eviction it caused, entries in LRU order).
 *
 * Never: decides what is a retransmit or a gap (`admission.ts` compares), or persists
 * (the snapshot goes through `admission.ts` to the caller's store).
 */

import { fromHex, toHex } from "./bytes.js";

/** A cursor pushed out by a newer publisher: its owner's next frames restart at any index. */
export interface EvictedCursor {
  readonly owner: Uint8Array;
  /** The next index it had. */
  readonly cursor: bigint;
}

/** Owner → next expected DATA index, at most `max` owners (module docs). */
export class CursorTable {
  readonly #max: number;
  // A Map iterates in insertion order: re-inserting on every advance keeps the least
  // recently advanced owner first.
  readonly #cursors = new Map<string, bigint>();

  constructor(max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`cursor table of ${max} entries`);
    this.#max = max;
  }

  /** The most owners kept. */
  get max(): number {
    return this.#max;
  }

  /** Owners held. */
  get size(): number {
    return this.#cursors.size;
  }

  /** The next index expected from `owner`, `undefined` if never seen (or evicted). */
  get(owner: Uint8Array): bigint | undefined {
    return this.#cursors.get(toHex(owner));
  }

  /** Sets `owner`'s cursor and makes it the most recent; returns what it evicted, if any. */
  advance(owner: Uint8Array, next: bigint): EvictedCursor | undefined {
    const key = toHex(owner);
    const known = this.#cursors.delete(key);
    let evicted: EvictedCursor | undefined;
    if (!known && this.#cursors.size >= this.#max) {
      const [oldest, cursor] = this.#cursors.entries().next().value as [string, bigint];
      this.#cursors.delete(oldest);
      evicted = { owner: fromHex(oldest), cursor };
    }
    this.#cursors.set(key, next);
    return evicted;
  }

  /** Every (owner hex, cursor), least recently advanced first. */
  entries(): Array<[string, bigint]> {
    return [...this.#cursors.entries()];
  }

  /** Empties the table. */
  clear(): void {
    this.#cursors.clear();
  }
}
