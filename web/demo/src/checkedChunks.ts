/**
 * What the verification worker found for each chunk, held on the page until the library's
 * `Admission` asks for it (its `validateSoc` option): the answer is handed over only for
 * the very bytes the worker checked, compared in full, so a chunk that merely shares an id
 * and a signature with a checked one gets nothing.
 *
 * Owns: `CheckedChunks` and its bound `CHECKED_CHUNKS_MAX`. An answer is taken once; the
 * oldest is forgotten when the bound is reached.
 *
 * Never: checks a signature itself.
 */

import { EARLY_FRAMES_MAX, type Recovered, type Result, SOC_MIN_CHUNK_SIZE, type SocFault, equalBytes, toHex } from "../../src/index.js";
import { VERIFY_PENDING_MAX } from "./verifyQueue.js";

/**
 * Answers held at most: every message the queue can release at once, plus the frames a
 * session may hold before its handlers are set (its early-frame bound).
 */
export const CHECKED_CHUNKS_MAX = VERIFY_PENDING_MAX + EARLY_FRAMES_MAX;

/** The worker's answer for one chunk. */
export type ChunkCheck = Result<Recovered, SocFault>;

interface Held {
  readonly chunk: Uint8Array;
  readonly check: ChunkCheck;
}

/** The worker's answers waiting for the library (module docs). */
export class CheckedChunks {
  readonly #held = new Map<string, Held[]>();
  readonly #max: number;
  #size = 0;

  constructor(max = CHECKED_CHUNKS_MAX) {
    this.#max = max;
  }

  /** Answers held now. */
  get size(): number {
    return this.#size;
  }

  /** Holds `check` for exactly `chunk`. */
  remember(chunk: Uint8Array, check: ChunkCheck): void {
    while (this.#size >= this.#max) this.#forgetOldest();
    const key = keyOf(chunk);
    const list = this.#held.get(key);
    if (list === undefined) this.#held.set(key, [{ chunk, check }]);
    else list.push({ chunk, check });
    this.#size++;
  }

  /** The answer held for these exact bytes, taken out; `undefined` if there is none. */
  take(chunk: Uint8Array): ChunkCheck | undefined {
    const key = keyOf(chunk);
    const list = this.#held.get(key);
    const at = list?.findIndex((held) => equalBytes(held.chunk, chunk)) ?? -1;
    if (list === undefined || at < 0) return undefined;
    const [held] = list.splice(at, 1);
    if (list.length === 0) this.#held.delete(key);
    this.#size--;
    return held!.check;
  }

  #forgetOldest(): void {
    const [key, list] = this.#held.entries().next().value as [string, Held[]];
    list.shift();
    if (list.length === 0) this.#held.delete(key);
    this.#size--;
  }
}

/** The id and the signature: cheap to read, and what tells chunks apart. */
function keyOf(chunk: Uint8Array): string {
  return toHex(chunk.subarray(0, SOC_MIN_CHUNK_SIZE));
}
