/**
 * A subscriber to one cohort over a `Transport`: join, verify every delivery end to end
 * (`Admission`, R41), keep the roster and the cursors across sessions in the caller's
 * `Store`, and reconnect after a reset with the R38 backoff.
 *
 * Owns: `Subscriber` (what it does on each stream, its events, the coalesced snapshot
 * writes) and `SubscriberEvent`/`SubscriberEnd`; the join, backoff and retry loop is the
 * `Reconnector`'s (reconnect.ts). Each stream joins as `addr` (default: 20 fresh random
 * bytes per stream, a spectator; pass the caller's own address to be a silent seat of a
 * closed cohort, R9). The snapshot is written after every accepted delivery, at most one
 * write in flight (a newer state replaces a pending one), and once more when the run ends.
 *
 * Never: throws a delivery at the caller (every frame becomes one event), publishes, or
 * retries a REJECTED Join (R3 judges the spec, which a retry does not change; with
 * `history: true` it may mean the broker refuses history, D11).
 */

import { randomBytes } from "@noble/hashes/utils.js";

import { type AdmissionOptions, Admission, type Verdict } from "./admission.js";
import { ADDRESS_BYTES } from "./bytes.js";
import { type ReconnectEnd, type ReconnectEvent, type ReconnectOptions, Reconnector } from "./reconnect.js";
import type { Session } from "./session.js";
import type { Spec } from "./spec.js";
import { MemoryStore, type Store, storeKey } from "./store.js";

/** What a subscriber reports: every verdict, and the life of its streams. */
export type SubscriberEvent =
  | Verdict
  | { readonly type: "joined"; readonly addr: Uint8Array; readonly challenge: Uint8Array }
  | ReconnectEvent
  | { readonly type: "store-fault"; readonly detail: string };

/** The end of a stream that is the subscriber's own: an EOS it verified. */
type OwnEnd = { readonly code: "eos" };

/** Why a run ended: stopped, EOS, rejected (saying whether history was asked for, D11), full, or reset. */
export type SubscriberEnd =
  Exclude<ReconnectEnd<OwnEnd>, { readonly code: "rejected" }> | { readonly code: "rejected"; readonly historyRequested: boolean };

/** Options of a `Subscriber`. */
export interface SubscriberOptions extends ReconnectOptions {
  /** The Join addr of every stream; default: fresh random bytes per stream. */
  readonly addr?: Uint8Array;
  /** Where the roster and cursors live across sessions (default: in memory). */
  readonly store?: Store;
  /** Tells apart subscribers of one cohort that share a store (default "default"). */
  readonly name?: string;
  readonly onEvent?: (event: SubscriberEvent) => void;
  readonly admission?: AdmissionOptions;
}

/** The receiving side of one cohort over the network (module docs). */
export class Subscriber {
  readonly spec: Spec;
  readonly admission: Admission;
  readonly #options: SubscriberOptions;
  readonly #store: Store;
  readonly #stateKey: string;
  readonly #reconnector: Reconnector<OwnEnd>;
  #running = false;
  #saving: Promise<void> | undefined;
  #dirty = false;

  constructor(options: SubscriberOptions) {
    if (options.addr !== undefined && options.addr.length !== ADDRESS_BYTES) {
      throw new RangeError(`addr of ${options.addr.length} bytes, expected ${ADDRESS_BYTES}`);
    }
    this.#options = options;
    this.spec = options.spec;
    this.admission = new Admission(options.spec, options.admission);
    this.#store = options.store ?? new MemoryStore();
    this.#stateKey = storeKey("subscriber", options.spec.topic, options.spec.admin, options.name ?? "default");
    this.#reconnector = new Reconnector(options, {
      addr: () => options.addr ?? randomBytes(ADDRESS_BYTES),
      opened: (session, addr) => this.#emit({ type: "joined", addr, challenge: session.challenge }),
      serve: (session) => this.#serve(session),
      event: (event) => this.#emit(event),
    });
  }

  /** The store key of this subscriber's snapshot. */
  get stateKey(): string {
    return this.#stateKey;
  }

  /** Ends the run: the current stream closes, a backoff wait ends. */
  stop(): void {
    this.#reconnector.stop();
  }

  /** Joins and verifies until stopped, EOS, REJECTED, or (without reconnect) a reset or FULL. */
  async run(): Promise<SubscriberEnd> {
    if (this.#running) throw new Error("run: this subscriber is already running");
    this.#running = true;
    try {
      await this.#restore();
      const end = await this.#reconnector.run();
      return end.code === "rejected" ? { code: "rejected", historyRequested: this.spec.history } : end;
    } finally {
      await this.#flush();
      this.#running = false;
    }
  }

  /** Verifies what arrives on an open stream, until it ends or brings EOS. */
  #serve(session: Session): void {
    session.listen({
      broadcast: (body) => {
        const verdict = this.admission.onFrame(body);
        if (verdict.type === "data" || verdict.type === "roster") this.#saveSoon();
        this.#emit(verdict);
        if (verdict.type === "eos") this.#reconnector.finish({ code: "eos" });
      },
      ended: (fault) => this.#reconnector.finish({ code: "reset", fault }),
    });
  }

  #emit(event: SubscriberEvent): void {
    this.#options.onEvent?.(event);
  }

  async #restore(): Promise<void> {
    let stored: string | undefined;
    try {
      stored = await this.#store.get(this.#stateKey);
    } catch (error) {
      return this.#emit({ type: "store-fault", detail: `cannot read ${this.#stateKey}: ${String(error)}` });
    }
    if (stored === undefined) return;
    let value: unknown;
    try {
      value = JSON.parse(stored);
    } catch {
      return this.#emit({ type: "store-fault", detail: `${this.#stateKey} is not JSON; starting empty` });
    }
    const restored = this.admission.restore(value);
    if (!restored.ok) this.#emit({ type: "store-fault", detail: `${this.#stateKey}: ${restored.fault.detail}; starting empty` });
  }

  #saveSoon(): void {
    this.#dirty = true;
    this.#saving ??= this.#saveLoop();
  }

  async #saveLoop(): Promise<void> {
    try {
      while (this.#dirty) {
        this.#dirty = false;
        try {
          await this.#store.set(this.#stateKey, JSON.stringify(this.admission.snapshot()));
        } catch (error) {
          this.#emit({ type: "store-fault", detail: `cannot write ${this.#stateKey}: ${String(error)}` });
        }
      }
    } finally {
      this.#saving = undefined;
    }
  }

  async #flush(): Promise<void> {
    while (this.#saving !== undefined) await this.#saving;
  }
}
