/**
 * A publisher for one identity in one cohort over a `Transport`: join with the spec and its
 * address, read the Ack, claim when its role needs it, publish DATA (and, as the admin,
 * ROSTER and EOS) under the stream's challenge, and reconnect after a reset with the R38
 * backoff, signing what was not written again under the new challenge.
 *
 * Owns: `Publisher` (what it does on each stream, its events, the send-buffer bound) and
 * `PublisherEvent`/`PublisherEnd`; the join, backoff and retry loop is the `Reconnector`'s
 * (reconnect.ts). Indices come from `IndexSequences` in the caller's `Store`, reserved
 * before a publication is queued, so a reconnect or a reload continues the sequence and
 * never reuses an index (R41). What arrives on its stream is verified by
 * its own `Admission` and reported; a verified roster grants or revokes it (R23, R24). On a
 * new stream the broker sends the roster in force again (R22): the `Admission` sees a
 * retransmit, and the roster it already holds is what the new stream is granted by. The
 * admin's own stream never receives its roster (D5), so each ROSTER it writes is applied
 * to its `Admission` as it is sent.
 *
 * Never: lets the key leave its `SigningKey`, throws a received frame at the caller, sends
 * while its role forbids it, or retries a REJECTED Join (R3 judges the spec).
 */

import { type AdmissionOptions, Admission, type Verdict } from "./admission.js";
import { Kind } from "./gen/bps_pb.js";
import { IndexSequences, type SequencedKind } from "./indexSequences.js";
import { type Outgoing, Outbox, PublishError, type Publication, type Role, describePublishFault } from "./outbox.js";
import { type ReconnectEnd, type ReconnectEvent, type ReconnectOptions, Reconnector } from "./reconnect.js";
import { encodeRoster } from "./roster.js";
import type { Session } from "./session.js";
import type { SigningKey } from "./signer.js";
import { checkPayload } from "./soc.js";
import type { Spec } from "./spec.js";
import { MemoryStore, type Store } from "./store.js";

/**
 * Bytes the link may hold unsent before the publisher waits: about 60 full frames. Beyond
 * it the network is not keeping up; waiting keeps memory bounded and leaves the rest in the
 * queue, where a reset re-signs it instead of losing it in a dead socket's buffer.
 */
export const SEND_BUFFER_BYTES_MAX_DEFAULT = 256 * 1024;
/** How long to wait before looking at a full send buffer again. */
export const SEND_BUFFER_POLL_MS = 20;

/** What a publisher reports. */
export type PublisherEvent =
  | { readonly type: "joined"; readonly challenge: Uint8Array; readonly role: Role }
  | { readonly type: "role"; readonly role: Role }
  | { readonly type: "sent"; readonly outgoing: Outgoing }
  | { readonly type: "received"; readonly verdict: Verdict }
  | ReconnectEvent;

/** The ends of a stream that are the publisher's own: an EOS it wrote or received. */
type OwnEnd = { readonly code: "eos-sent" } | { readonly code: "eos-received" };

/** Why a run ended: stopped, EOS sent or received, rejected, full, or reset. */
export type PublisherEnd = ReconnectEnd<OwnEnd>;

/** Options of a `Publisher`. */
export interface PublisherOptions extends ReconnectOptions {
  readonly key: SigningKey;
  /** Where the next indices live (default: in memory). */
  readonly store?: Store;
  /** The first index of a sequence with nothing stored (default: Unix time in ms). */
  readonly firstIndex?: () => bigint;
  /** Implicit ANCHOR only: the GSOC id. */
  readonly anchorId?: Uint8Array;
  /** Publications held at most while no stream takes them. */
  readonly queuedPublicationsMax?: number;
  readonly sendBufferBytesMax?: number;
  readonly onEvent?: (event: PublisherEvent) => void;
  readonly admission?: AdmissionOptions;
}

/** The publishing side of one identity over the network (module docs). */
export class Publisher {
  readonly spec: Spec;
  readonly admission: Admission;
  readonly #options: PublisherOptions;
  readonly #outbox: Outbox;
  readonly #indices: IndexSequences;
  readonly #reconnector: Reconnector<OwnEnd>;
  #session: Session | undefined;
  #pumping = false;
  #waitingForBuffer = false;
  #running = false;
  #drainWaiters: Array<(drained: boolean) => void> = [];
  #reportedRole: Role | undefined;

  /** Throws `PublisherError` when the key does not fit an implicit binding's shape. */
  constructor(options: PublisherOptions) {
    this.#options = options;
    this.spec = options.spec;
    this.#outbox = new Outbox(options.spec, options.key, {
      ...(options.anchorId === undefined ? {} : { anchorId: options.anchorId }),
      ...(options.queuedPublicationsMax === undefined ? {} : { queuedPublicationsMax: options.queuedPublicationsMax }),
    });
    this.#indices = new IndexSequences({
      store: options.store ?? new MemoryStore(),
      topic: options.spec.topic,
      admin: options.spec.admin,
      owner: options.key.address,
      ...(options.firstIndex === undefined ? {} : { firstIndex: options.firstIndex }),
    });
    this.admission = new Admission(options.spec, options.admission);
    this.#reconnector = new Reconnector(options, {
      addr: () => this.addr,
      serve: (session) => this.#serve(session),
      released: () => {
        this.#session = undefined;
        this.#outbox.endSession();
      },
      event: (event) => this.#emit(event),
    });
  }

  /** The identity's address (the Join addr). */
  get addr(): Uint8Array {
    return this.#outbox.addr;
  }

  /** The role on the current stream (`undefined` between streams). */
  get role(): Role | undefined {
    return this.#outbox.role;
  }

  /** Publications not yet written. */
  get queued(): number {
    return this.#outbox.queued;
  }

  /** The store key of a sequence (for inspection and migration). */
  indexKey(kind: SequencedKind): string {
    return this.#indices.key(kind);
  }

  /** Queues a DATA publication; resolves with its index once reserved. */
  publish(payload: Uint8Array): Promise<bigint> {
    return this.#queue(Kind.DATA, payload);
  }

  /** Queues a ROSTER naming `publishers` (admin only, R19); resolves with its index. */
  publishRoster(publishers: readonly Uint8Array[]): Promise<bigint> {
    return this.#queue(Kind.ROSTER, encodeRoster(publishers));
  }

  /** Queues the end of stream (admin only): an empty chunk at index 0 (R21). */
  async endOfStream(): Promise<void> {
    this.#check(Kind.EOS, new Uint8Array(0));
    this.#enqueue({ kind: Kind.EOS, index: 0n, payload: new Uint8Array(0) });
  }

  /** Resolves `true` once the queue is empty, `false` if the run ends first. */
  drained(): Promise<boolean> {
    if (this.#outbox.queued === 0) return Promise.resolve(true);
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  /** Ends the run: the stream closes, a backoff wait ends. Queued publications stay. */
  stop(): void {
    this.#reconnector.stop();
  }

  /** Joins and publishes until stopped, EOS, REJECTED, or (without reconnect) a reset or FULL. */
  async run(): Promise<PublisherEnd> {
    if (this.#running) throw new Error("run: this publisher is already running");
    this.#running = true;
    try {
      return await this.#reconnector.run();
    } finally {
      this.#running = false;
      this.#settleDrain(false);
    }
  }

  async #queue(kind: SequencedKind, payload: Uint8Array): Promise<bigint> {
    this.#check(kind, payload);
    const index = await this.#indices.reserve(kind);
    this.#enqueue({ kind, index, payload });
    return index;
  }

  #check(kind: Publication["kind"], payload: Uint8Array): void {
    checkPayload(payload);
    const refused = this.#outbox.refusal(kind);
    if (refused !== undefined) throw new PublishError(refused, describePublishFault(refused));
  }

  #enqueue(publication: Publication): void {
    this.#outbox.enqueue(publication);
    this.#pump();
  }

  /** Takes an open stream: signs under its challenge and writes what is queued. */
  #serve(session: Session): void {
    this.#session = session;
    this.#outbox.beginSession(session.challenge);
    this.#reportedRole = this.#outbox.role;
    this.#emit({ type: "joined", challenge: session.challenge, role: this.#reportedRole ?? "publisher" });
    session.listen({
      broadcast: (body) => this.#onBroadcast(body),
      ended: (fault) => this.#reconnector.finish({ code: "reset", fault }),
    });
    this.#pump();
  }

  #onBroadcast(body: Uint8Array): void {
    const verdict = this.admission.onFrame(body);
    this.#emit({ type: "received", verdict });
    if (verdict.type === "eos") return this.#reconnector.finish({ code: "eos-received" });
    if (verdict.type === "roster") this.#outbox.onRoster(verdict.publishers);
    if (isRosterInForce(verdict, this.admission.rosterCursor)) this.#outbox.onRoster(this.admission.roster);
    this.#noteRole();
    this.#pump();
  }

  /** Reports a role change (grant, claim, revocation) once. */
  #noteRole(): void {
    const role = this.#outbox.role;
    if (role === undefined || role === this.#reportedRole) return;
    this.#reportedRole = role;
    this.#emit({ type: "role", role });
  }

  /** Writes what may be written now, unless the link's buffer is full. */
  #pump(): void {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      const limit = this.#options.sendBufferBytesMax ?? SEND_BUFFER_BYTES_MAX_DEFAULT;
      for (;;) {
        const session = this.#session;
        if (session === undefined) return;
        if (session.bufferedBytes > limit) return this.#waitForBuffer();
        const outgoing = this.#outbox.nextFrame();
        if (outgoing === undefined) break;
        session.send(outgoing.signed.frame);
        this.#outbox.markSent();
        // The admin's stream never receives its own roster (D5): it knows it from here.
        if (outgoing.kind === Kind.ROSTER) this.admission.onBroadcast(outgoing.signed.broadcast);
        this.#emit({ type: "sent", outgoing });
        this.#noteRole();
        if (outgoing.kind === Kind.EOS) return this.#reconnector.finish({ code: "eos-sent" });
      }
      if (this.#outbox.queued === 0) this.#settleDrain(true);
    } finally {
      this.#pumping = false;
    }
  }

  #waitForBuffer(): void {
    if (this.#waitingForBuffer) return;
    this.#waitingForBuffer = true;
    void this.#reconnector.wait(SEND_BUFFER_POLL_MS).then(() => {
      this.#waitingForBuffer = false;
      this.#pump();
    });
  }

  #settleDrain(drained: boolean): void {
    const waiters = this.#drainWaiters;
    this.#drainWaiters = [];
    for (const resolve of waiters) resolve(drained);
  }

  #emit(event: PublisherEvent): void {
    this.#options.onEvent?.(event);
  }
}

/** A valid ROSTER retransmit of the roster in force: the broker re-sent it on a new stream (R22). */
function isRosterInForce(verdict: Verdict, rosterCursor: bigint): boolean {
  return (
    verdict.type === "dropped" &&
    verdict.reason.code === "retransmit" &&
    verdict.reason.kind === Kind.ROSTER &&
    verdict.reason.index + 1n === rosterCursor
  );
}
