/**
 * The reconnect loop that the `Publisher` and the `Subscriber` share: join, serve the open
 * stream until it ends, and after a reset or FULL back off (R38) and join again.
 *
 * Owns: `Reconnector` (the loop, the stop signal, the one way the current stream ends),
 * `ReconnectOptions`, `ReconnectEvent`, `StreamEnd` and `ReconnectEnd`, and `BrokerList`:
 * given several brokers instead of one transport, the loop joins the cohort's root by
 * placement (placement.ts, docs/SCALING.md) and, after a failed connect or a lost stream,
 * the next broker in rank, wrapping around to the root after the last; a FULL root is
 * retried, not failed over (it is the cohort's meeting point). The backoff starts
 * over after every Join answered OK. A run ends when stopped, on a REJECTED Join, on an
 * end its owner reports (EOS), or, without `reconnect`, on the first reset or FULL; a reset
 * that a stop caused is not reported. `stop()` ends the current stream or backoff wait at
 * once.
 *
 * Never: reads or writes a stream's frames (its owner's `serve` does), retries a REJECTED
 * Join (R3 judges the spec, which a retry does not change), or swallows an error that is
 * not a `SessionError`.
 */

import { Backoff } from "./backoff.js";
import { Status } from "./gen/bps_pb.js";
import { brokerNames, rankBrokers } from "./placement.js";
import { Session, SessionError, type SessionFault, type SessionOptions } from "./session.js";
import { type Sleep, timerSleep } from "./sleep.js";
import { type Spec, cohortKey } from "./spec.js";
import type { Transport } from "./transport.js";

/** Several brokers, ranked per cohort by placement; build one with `brokerList`. */
export interface BrokerList {
  /** The brokers' names (placement.ts `brokerName`: each entry trimmed), as given. */
  readonly brokers: readonly string[];
  /** The transport that reaches one broker, by its name. */
  transportFor(broker: string): Transport;
}

/** A `BrokerList`; throws `PlacementError` for a list that cannot be ranked (empty, an empty entry, a name twice). */
export function brokerList(brokers: readonly string[], transportFor: (broker: string) => Transport): BrokerList {
  return { brokers: Object.freeze(brokerNames(brokers)), transportFor };
}

/** The options of a `Publisher` and a `Subscriber` that drive their streams. */
export interface ReconnectOptions {
  /** One broker's transport, or several brokers placed by cohort key (`brokerList`). */
  readonly transport: Transport | BrokerList;
  readonly spec: Spec;
  /** Reconnect after a reset or FULL (default true). */
  readonly reconnect?: boolean;
  readonly backoff?: Backoff;
  /** How backoff delays (and, for a publisher, a full send buffer) are waited out. */
  readonly sleep?: Sleep;
  readonly session?: SessionOptions;
}

/**
 * What the loop reports of a Join refused or a stream reset (`retryInMs` when it retries;
 * `next`, the broker it retries at, when a `BrokerList` has another to go to).
 */
export type ReconnectEvent =
  | { readonly type: "refused"; readonly status: Status.FULL | Status.REJECTED; readonly retryInMs?: number }
  | { readonly type: "reset"; readonly fault: SessionFault; readonly retryInMs?: number; readonly next?: string };

type Reset = { readonly code: "reset"; readonly fault: SessionFault };

/** How one stream ended: an end of its owner's (`E`, such as EOS), a stop, or a reset. */
export type StreamEnd<E> = E | { readonly code: "stopped" } | Reset;

/** Why a run ended. */
export type ReconnectEnd<E> = StreamEnd<E> | { readonly code: "rejected" } | { readonly code: "full" };

/** What the owner of the loop does with its streams. */
export interface StreamOwner {
  /** The Join addr of the next stream. */
  addr(): Uint8Array;
  /** A Join was answered OK: told before a stop is looked at, so even when one overtook it. */
  opened?(session: Session, addr: Uint8Array): void;
  /** Serves the open stream until `Reconnector.finish` or `stop` ends it. */
  serve(session: Session, addr: Uint8Array): void;
  /** The current stream ended; it is closed right after this. */
  released?(): void;
  event(event: ReconnectEvent): void;
}

/** A broker in rank order and the transport that reaches it. */
interface Placed {
  readonly name: string;
  readonly transport: Transport;
}

/** One transport, or the brokers of a list in the rank order of `spec`'s cohort (root first). */
function placed(transport: Transport | BrokerList, spec: Spec): readonly Placed[] {
  if (!("brokers" in transport)) return [{ name: "", transport }];
  return rankBrokers(transport.brokers, cohortKey(spec)).map((position) => {
    const name = transport.brokers[position]!;
    return { name, transport: transport.transportFor(name) };
  });
}

/** The loop (module docs); `E` are the ends its owner reports. */
export class Reconnector<E extends { readonly code: string }> {
  readonly #options: ReconnectOptions;
  readonly #owner: StreamOwner;
  readonly #backoff: Backoff;
  readonly #sleep: Sleep;
  readonly #stopping = new AbortController();
  /** The brokers in rank order; `#current` is the one the next Join goes to. */
  readonly #route: readonly Placed[];
  #current = 0;
  #finish: ((end: StreamEnd<E>) => void) | undefined;

  /** Throws `PlacementError` when `options.transport` is a list that cannot be ranked. */
  constructor(options: ReconnectOptions, owner: StreamOwner) {
    this.#options = options;
    this.#owner = owner;
    this.#backoff = options.backoff ?? new Backoff();
    this.#sleep = options.sleep ?? timerSleep;
    this.#route = placed(options.transport, options.spec);
  }

  /** Ends the run: the current stream closes, a backoff wait ends. */
  stop(): void {
    this.#stopping.abort();
    this.#finish?.({ code: "stopped" });
  }

  /** Ends the current stream with `end` (nothing happens between streams). */
  finish(end: StreamEnd<E>): void {
    this.#finish?.(end);
  }

  /** Waits `ms`, or less if the run is stopped meanwhile. */
  wait(ms: number): Promise<void> {
    return this.#sleep(ms, this.#stopping.signal);
  }

  /** Joins and serves until the run ends (module docs). */
  async run(): Promise<ReconnectEnd<E>> {
    for (;;) {
      if (this.#stopping.signal.aborted) return { code: "stopped" };
      const end = await this.#attempt();
      if (end !== undefined) return end;
    }
  }

  /** One Join and its stream: how the run ends, or `undefined` to join again. */
  async #attempt(): Promise<ReconnectEnd<E> | undefined> {
    const addr = this.#owner.addr();
    let served: StreamEnd<E>;
    try {
      const { transport } = this.#route[this.#current]!;
      const outcome = await Session.join(transport, this.#options.spec, addr, this.#options.session);
      if (!outcome.ok) return await this.#refused(outcome.status);
      this.#backoff.reset();
      this.#owner.opened?.(outcome.session, addr);
      served = await this.#serve(outcome.session, addr);
    } catch (error) {
      if (!(error instanceof SessionError)) throw error;
      served = { code: "reset", fault: error.fault };
    }
    if (!isReset(served)) return served;
    return this.#reset(served);
  }

  async #refused(status: Status.FULL | Status.REJECTED): Promise<ReconnectEnd<E> | undefined> {
    if (status === Status.REJECTED || !this.#reconnects()) {
      this.#owner.event({ type: "refused", status });
      return status === Status.REJECTED ? { code: "rejected" } : { code: "full" };
    }
    await this.#retry((retryInMs) => this.#owner.event({ type: "refused", status, retryInMs }));
    return undefined;
  }

  async #reset(reset: Reset): Promise<ReconnectEnd<E> | undefined> {
    if (this.#stopping.signal.aborted) return { code: "stopped" };
    if (!this.#reconnects()) {
      this.#owner.event({ type: "reset", fault: reset.fault });
      return reset;
    }
    this.#current = (this.#current + 1) % this.#route.length;
    const next = this.#route.length > 1 ? { next: this.#route[this.#current]!.name } : {};
    await this.#retry((retryInMs) => this.#owner.event({ type: "reset", fault: reset.fault, retryInMs, ...next }));
    return undefined;
  }

  #reconnects(): boolean {
    return this.#options.reconnect ?? true;
  }

  async #retry(announce: (retryInMs: number) => void): Promise<void> {
    const delay = this.#backoff.nextDelayMs();
    announce(delay);
    await this.wait(delay);
  }

  #serve(session: Session, addr: Uint8Array): Promise<StreamEnd<E>> {
    return new Promise((resolve) => {
      const finish = (end: StreamEnd<E>) => {
        if (this.#finish !== finish) return;
        this.#finish = undefined;
        this.#owner.released?.();
        session.close();
        resolve(end);
      };
      this.#finish = finish;
      if (this.#stopping.signal.aborted) return finish({ code: "stopped" });
      this.#owner.serve(session, addr);
    });
  }
}

function isReset<E extends { readonly code: string }>(end: StreamEnd<E>): end is Reset {
  return end.code === "reset";
}
