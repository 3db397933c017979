/**
 * The publisher's index sequences (R41: a publisher MUST NOT reuse a DATA or ROSTER index
 * across sessions): one per (topic, admin, own address, kind), kept in the caller's
 * `Store`, each index written there before it is handed out.
 *
 * Owns: `IndexSequences.reserve`, which gives out indices in call order, persisting the
 * next one first, so a crash after a reservation skips an index rather than reusing it.
 *
 * Never: signs or sends, or reuses an index after a failed store write (the reservation
 * fails instead). Without a stored value, a sequence starts at `firstIndex()`, by default
 * the current Unix time in milliseconds, as the Rust `bps` CLI does: a publisher whose store
 * was lost (a new browser profile, the in-memory default after a reload) still starts above
 * the indices it used before, unless it published faster than one index per millisecond.
 */

import { U64_MAX, toHex } from "./bytes.js";
import { BpsError } from "./errors.js";
import { Kind } from "./gen/bps_pb.js";
import { type Store, storeKey } from "./store.js";

/** The kinds whose indices move (EOS is always 0, AUTH is 0 on every stream). */
export type SequencedKind = Kind.DATA | Kind.ROSTER;

/** Why no index can be given out. */
export type SequenceFault =
  | { readonly code: "index-exhausted"; readonly kind: SequencedKind }
  | { readonly code: "index-store-corrupt"; readonly key: string; readonly value: string }
  | { readonly code: "index-store-failed"; readonly key: string; readonly detail: string };

/** An index could not be reserved. */
export class SequenceError extends BpsError<SequenceFault> {}

/** The default first index of a sequence with nothing stored (module docs). */
export function wallClockIndex(): bigint {
  return BigInt(Date.now());
}

/** Index sequences of one identity in one cohort (module docs). */
export class IndexSequences {
  readonly #store: Store;
  readonly #keys: Record<SequencedKind, string>;
  readonly #firstIndex: () => bigint;
  readonly #next = new Map<SequencedKind, bigint>();
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: {
    readonly store: Store;
    readonly topic: Uint8Array;
    readonly admin: Uint8Array | undefined;
    readonly owner: Uint8Array;
    readonly firstIndex?: () => bigint;
  }) {
    this.#store = options.store;
    const key = (kind: string) => storeKey("publisher", options.topic, options.admin, toHex(options.owner), kind);
    this.#keys = { [Kind.DATA]: key("data"), [Kind.ROSTER]: key("roster") };
    this.#firstIndex = options.firstIndex ?? wallClockIndex;
  }

  /** The store key of a sequence. */
  key(kind: SequencedKind): string {
    return this.#keys[kind];
  }

  /** The next index of `kind`, persisted as used before it is returned. Throws `SequenceError`. */
  reserve(kind: SequencedKind): Promise<bigint> {
    const reservation = this.#queue.then(() => this.#reserveNow(kind));
    // A failed reservation must not block the ones after it.
    this.#queue = reservation.catch(() => undefined);
    return reservation;
  }

  async #reserveNow(kind: SequencedKind): Promise<bigint> {
    const key = this.#keys[kind];
    const index = this.#next.get(kind) ?? (await this.#load(key)) ?? this.#firstIndex();
    // 2^64-1 is refused by bee and the broker (R18, D13): the sequence ends below it.
    if (index >= U64_MAX) {
      throw new SequenceError({ code: "index-exhausted", kind }, `the ${Kind[kind]} index sequence is exhausted`);
    }
    try {
      await this.#store.set(key, (index + 1n).toString());
    } catch (error) {
      const detail = error instanceof Error ? error.message : String(error);
      throw new SequenceError({ code: "index-store-failed", key, detail }, `cannot store the next index: ${detail}`);
    }
    this.#next.set(kind, index + 1n);
    return index;
  }

  async #load(key: string): Promise<bigint | undefined> {
    let value: string | undefined;
    try {
      value = await this.#store.get(key);
    } catch (error) {
      const detail = error instanceof Error ? error.message : String(error);
      throw new SequenceError({ code: "index-store-failed", key, detail }, `cannot read the next index: ${detail}`);
    }
    if (value === undefined) return undefined;
    if (!/^(0|[1-9][0-9]*)$/.test(value) || BigInt(value) > U64_MAX) {
      throw new SequenceError({ code: "index-store-corrupt", key, value }, `stored index ${JSON.stringify(value)} is not a uint64`);
    }
    return BigInt(value);
  }
}
