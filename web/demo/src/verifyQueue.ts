/**
 * The page's side of the verification budget: every message a broker sends waits here, in
 * arrival order, while the verification worker checks it, and leaves only in that order,
 * so the library sees the stream as it came minus what the budget dropped.
 *
 * Owns: `VerifyQueue` and its bounds: at most `VERIFY_PENDING_MAX` messages and
 * `VERIFY_PENDING_BYTES_MAX` bytes wait at once; a message that arrives when either is
 * reached is dropped unverified and counted (`full`), and one the worker answered "late"
 * (its time budget, `verifyCheck.ts`) is dropped and counted too. A message longer than
 * `VERIFY_MESSAGE_BYTES_MAX` is not sent to the worker: no frame the library accepts is
 * that long, so it goes to the library in its turn, which refuses it without any
 * cryptography (its frame bound).
 *
 * Never: touches a Worker, a socket or the DOM (`verifier.ts` does), or reorders messages.
 */

import { FRAME_BYTES_MAX_DEFAULT } from "../../src/index.js";

/**
 * Messages waiting for the worker at most: a few seconds of a busy room at the worker's
 * pace (a check costs a millisecond or more), small enough that a flood costs little memory.
 */
export const VERIFY_PENDING_MAX = 256;
/** Bytes waiting at most: 256 full chunks of about 4.2 KiB each, with room to spare. */
export const VERIFY_PENDING_BYTES_MAX = 2 * 1024 * 1024;
/** Longest message the worker is asked to check: the library's own frame bound. */
export const VERIFY_MESSAGE_BYTES_MAX = FRAME_BYTES_MAX_DEFAULT;

/** What the worker said about one message. */
export type Settlement = { readonly type: "deliver" } | { readonly type: "late" };

/** One message on its way through the queue. */
export interface Pending<Target> {
  readonly seq: number;
  readonly message: Uint8Array;
  /** Whose message it is (the link it arrived on). */
  readonly target: Target;
}

/** Counters shown on the page. */
export interface VerifyCounts {
  /** Messages the worker checked and the library got. */
  delivered: number;
  /** Dropped unverified: the queue was full when they arrived. */
  droppedFull: number;
  /** Dropped unverified: they waited longer than the worker's time budget. */
  droppedLate: number;
  /** Waiting now. */
  pending: number;
  pendingBytes: number;
}

interface Entry<Target> extends Pending<Target> {
  /** Sent to the worker and not answered yet. */
  waiting: boolean;
  settlement: Settlement | undefined;
}

/** The ordered, bounded queue of messages waiting for verification (module docs). */
export class VerifyQueue<Target> {
  readonly #entries: Array<Entry<Target>> = [];
  readonly #max: number;
  readonly #bytesMax: number;
  #nextSeq = 0;
  #bytes = 0;
  readonly counts: VerifyCounts = { delivered: 0, droppedFull: 0, droppedLate: 0, pending: 0, pendingBytes: 0 };

  constructor(max = VERIFY_PENDING_MAX, bytesMax = VERIFY_PENDING_BYTES_MAX) {
    this.#max = max;
    this.#bytesMax = bytesMax;
  }

  /**
   * Takes a message that just arrived. Returns it with its sequence number when the worker
   * must check it, `"pass"` when it needs no check (too long: it waits for its turn only),
   * or `"dropped"` when the budget is spent (counted).
   */
  offer(message: Uint8Array, target: Target): Pending<Target> | "pass" | "dropped" {
    const bytes = message.length;
    if (this.#entries.length >= this.#max || this.#bytes + bytes > this.#bytesMax) {
      this.counts.droppedFull++;
      return "dropped";
    }
    const check = bytes <= VERIFY_MESSAGE_BYTES_MAX;
    const entry: Entry<Target> = {
      seq: this.#nextSeq++,
      message,
      target,
      waiting: check,
      settlement: check ? undefined : { type: "deliver" },
    };
    this.#entries.push(entry);
    this.#bytes += bytes;
    this.#update();
    return check ? entry : "pass";
  }

  /** The worker's answer for `seq`; an unknown one (its link is gone) is ignored. */
  settle(seq: number, settlement: Settlement): void {
    const entry = this.#entries.find((candidate) => candidate.seq === seq && candidate.waiting);
    if (entry === undefined) return;
    entry.waiting = false;
    entry.settlement = settlement;
  }

  /** The messages now free to go to the library, in arrival order (late ones counted and left out). */
  takeReady(): Array<Pending<Target>> {
    const ready: Array<Pending<Target>> = [];
    while (this.#entries.length > 0 && this.#entries[0]!.settlement !== undefined) {
      const entry = this.#entries.shift()!;
      this.#bytes -= entry.message.length;
      if (entry.settlement!.type === "late") {
        this.counts.droppedLate++;
      } else {
        this.counts.delivered++;
        ready.push({ seq: entry.seq, message: entry.message, target: entry.target });
      }
    }
    this.#update();
    return ready;
  }

  /** Whether any message of `target` still waits. */
  holds(target: Target): boolean {
    return this.#entries.some((entry) => entry.target === target);
  }

  /** Forgets every message of `target` (its link closed): nobody is left to take them. */
  forget(target: Target): void {
    for (let at = this.#entries.length - 1; at >= 0; at--) {
      const entry = this.#entries[at]!;
      if (entry.target !== target) continue;
      this.#bytes -= entry.message.length;
      this.#entries.splice(at, 1);
    }
    this.#update();
  }

  #update(): void {
    this.counts.pending = this.#entries.length;
    this.counts.pendingBytes = this.#bytes;
  }
}
