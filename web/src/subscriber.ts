/**
 * A subscriber to one cohort over a `Transport`: join, verify every delivery end to end
 * (`Admission`, R41), keep the roster and the cursors across sessions in the caller's
 * `Store`, and reconnect after a reset with the R38 backoff.
 *
 * Owns: `Subscriber` (its run loop, its events, the coalesced snapshot writes) and
 * `SubscriberEvent`/`SubscriberEnd`. Each stream joins as `addr` (default: 20 fresh random
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
import { Backoff } from "./backoff.js";
import { ADDRESS_BYTES } from "./bytes.js";
import { Status } from "./gen/bps_pb.js";
import { Session, SessionError, type SessionFault, type SessionOptions } from "./session.js";
import { type Sleep, timerSleep } from "./sleep.js";
import type { Spec } from "./spec.js";
import { MemoryStore, type Store, storeKey } from "./store.js";
import type { Transport } from "./transport.js";

/** What a subscriber reports: every verdict, and the life of its streams. */
export type SubscriberEvent =
  | Verdict
  | { readonly type: "joined"; readonly addr: Uint8Array; readonly challenge: Uint8Array }
  | { readonly type: "refused"; readonly status: Status.FULL | Status.REJECTED; readonly retryInMs?: number }
  | { readonly type: "reset"; readonly fault: SessionFault; readonly retryInMs?: number }
  | { readonly type: "store-fault"; readonly detail: string };

/** Why a run ended. */
export type SubscriberEnd =
  | { readonly code: "stopped" }
  | { readonly code: "eos" }
  | { readonly code: "rejected"; readonly historyRequested: boolean }
  | { readonly code: "full" }
  | { readonly code: "reset"; readonly fault: SessionFault };

/** Options of a `Subscriber`. */
export interface SubscriberOptions {
  readonly transport: Transport;
  readonly spec: Spec;
  /** The Join addr of every stream; default: fresh random bytes per stream. */
  readonly addr?: Uint8Array;
  /** Where the roster and cursors live across sessions (default: in memory). */
  readonly store?: Store;
  /** Tells apart subscribers of one cohort that share a store (default "default"). */
  readonly name?: string;
  /** Reconnect after a reset or FULL (default true). */
  readonly reconnect?: boolean;
  readonly onEvent?: (event: SubscriberEvent) => void;
  readonly backoff?: Backoff;
  /** How backoff delays (and, for a publisher, a full send buffer) are waited out. */
  readonly sleep?: Sleep;
  readonly session?: SessionOptions;
  readonly admission?: AdmissionOptions;
}

type Served = { readonly code: "eos" } | { readonly code: "stopped" } | { readonly code: "reset"; readonly fault: SessionFault };

/** The receiving side of one cohort over the network (module docs). */
export class Subscriber {
  readonly spec: Spec;
  readonly admission: Admission;
  readonly #options: SubscriberOptions;
  readonly #store: Store;
  readonly #stateKey: string;
  readonly #backoff: Backoff;
  readonly #sleep: Sleep;
  readonly #stopping = new AbortController();
  #running = false;
  #saving: Promise<void> | undefined;
  #dirty = false;
  #wake: ((served: Served) => void) | undefined;

  constructor(options: SubscriberOptions) {
    if (options.addr !== undefined && options.addr.length !== ADDRESS_BYTES) {
      throw new RangeError(`addr of ${options.addr.length} bytes, expected ${ADDRESS_BYTES}`);
    }
    this.#options = options;
    this.spec = options.spec;
    this.admission = new Admission(options.spec, options.admission);
    this.#store = options.store ?? new MemoryStore();
    this.#stateKey = storeKey("subscriber", options.spec.topic, options.spec.admin, options.name ?? "default");
    this.#backoff = options.backoff ?? new Backoff();
    this.#sleep = options.sleep ?? timerSleep;
  }

  /** The store key of this subscriber's snapshot. */
  get stateKey(): string {
    return this.#stateKey;
  }

  /** Ends the run: the current stream closes, a backoff wait ends. */
  stop(): void {
    this.#stopping.abort();
    this.#wake?.({ code: "stopped" });
  }

  /** Joins and verifies until stopped, EOS, REJECTED, or (without reconnect) a reset or FULL. */
  async run(): Promise<SubscriberEnd> {
    if (this.#running) throw new Error("run: this subscriber is already running");
    this.#running = true;
    try {
      await this.#restore();
      return await this.#loop();
    } finally {
      await this.#flush();
      this.#running = false;
    }
  }

  async #loop(): Promise<SubscriberEnd> {
    const reconnect = this.#options.reconnect ?? true;
    for (;;) {
      if (this.#stopping.signal.aborted) return { code: "stopped" };
      const addr = this.#options.addr ?? randomBytes(ADDRESS_BYTES);
      let served: Served;
      try {
        const outcome = await Session.join(this.#options.transport, this.spec, addr, this.#options.session);
        if (!outcome.ok) {
          if (outcome.status === Status.REJECTED) {
            this.#emit({ type: "refused", status: outcome.status });
            return { code: "rejected", historyRequested: this.spec.history };
          }
          if (!reconnect) {
            this.#emit({ type: "refused", status: outcome.status });
            return { code: "full" };
          }
          await this.#retry((retryInMs) => this.#emit({ type: "refused", status: outcome.status, retryInMs }));
          continue;
        }
        this.#backoff.reset();
        this.#emit({ type: "joined", addr, challenge: outcome.session.challenge });
        served = await this.#serve(outcome.session);
      } catch (error) {
        if (!(error instanceof SessionError)) throw error;
        served = { code: "reset", fault: error.fault };
      }
      if (served.code !== "reset") return served;
      if (this.#stopping.signal.aborted) return { code: "stopped" };
      if (!reconnect) {
        this.#emit({ type: "reset", fault: served.fault });
        return served;
      }
      const fault = served.fault;
      await this.#retry((retryInMs) => this.#emit({ type: "reset", fault, retryInMs }));
    }
  }

  async #retry(announce: (retryInMs: number) => void): Promise<void> {
    const delay = this.#backoff.nextDelayMs();
    announce(delay);
    await this.#sleep(delay, this.#stopping.signal);
  }

  #serve(session: Session): Promise<Served> {
    return new Promise((resolve) => {
      const finish = (served: Served) => {
        this.#wake = undefined;
        session.close();
        resolve(served);
      };
      this.#wake = finish;
      if (this.#stopping.signal.aborted) return finish({ code: "stopped" });
      session.listen({
        broadcast: (body) => {
          const verdict = this.admission.onFrame(body);
          if (verdict.type === "data" || verdict.type === "roster") this.#saveSoon();
          this.#emit(verdict);
          if (verdict.type === "eos") finish({ code: "eos" });
        },
        ended: (fault) => finish({ code: "reset", fault }),
      });
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
