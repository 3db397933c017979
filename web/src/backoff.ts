/**
 * Peer backoff after a refused Join or a reset stream (R38): randomised exponential,
 * 1–30 s, full jitter, the schedule of the Rust `bps_bench::backoff`.
 *
 * Owns: `Backoff`. Attempt n (from 0) draws a delay uniformly from
 * [1 s, min(30 s, 2^(n+1) s)] in whole milliseconds: the ceiling doubles (2, 4, 8, 16, 30,
 * 30, ... s) and the whole range from the floor up is used, so clients that lost a broker
 * together do not come back together. `reset` starts over after a Join answered OK.
 *
 * Never: sleeps or reads a clock (callers sleep for the returned delay); the randomness is
 * the caller's choice, so tests pass a seeded source and get the same schedule every time.
 */

/** The shortest delay (R38). */
export const BACKOFF_MIN_MS = 1_000;
/** The longest delay (R38). */
export const BACKOFF_MAX_MS = 30_000;
/** 2^5 s already exceeds the cap, so larger exponents need not be computed. */
const EXPONENT_MAX = 5;

/** A uniform integer in [0, bound) for a bound of at most 2^32. */
export type RandomInt = (bound: number) => number;

/** Uniform integers from `crypto.getRandomValues`, by rejection (no modulo bias). */
export function cryptoRandomInt(bound: number): number {
  if (!Number.isInteger(bound) || bound < 1 || bound > 2 ** 32) throw new RangeError(`random bound ${bound}`);
  const limit = 2 ** 32 - (2 ** 32 % bound);
  const word = new Uint32Array(1);
  for (;;) {
    globalThis.crypto.getRandomValues(word);
    if (word[0]! < limit) return word[0]! % bound;
  }
}

/** The R38 schedule (module docs). */
export class Backoff {
  readonly #random: RandomInt;
  #attempt = 0;

  constructor(random: RandomInt = cryptoRandomInt) {
    this.#random = random;
  }

  /** Retries since the last reset. */
  get attempt(): number {
    return this.#attempt;
  }

  /** The ceiling of attempt `attempt`: min(30 s, 2^(attempt+1) s). */
  static ceilingMs(attempt: number): number {
    const exponent = Math.min(attempt + 1, EXPONENT_MAX);
    return Math.min(BACKOFF_MIN_MS * 2 ** exponent, BACKOFF_MAX_MS);
  }

  /** The delay before the next retry; each call is one more attempt. */
  nextDelayMs(): number {
    const ceiling = Backoff.ceilingMs(this.#attempt);
    this.#attempt = Math.min(this.#attempt + 1, Number.MAX_SAFE_INTEGER);
    return BACKOFF_MIN_MS + this.#random(ceiling - BACKOFF_MIN_MS + 1);
  }

  /** Starts over at attempt 0 (after a Join answered OK). */
  reset(): void {
    this.#attempt = 0;
  }
}
