/**
 * One BPS stream over a `Link`: send the Join, read the Ack, then exchange Broadcast
 * frames, one frame per message (docs/PROTOCOL.md §1 and §5, R2–R5), as the Rust
 * `bps_bench::session` does over TCP.
 *
 * Owns: `Session.join` (the handshake within `handshakeTimeoutMs`, the stream's challenge,
 * R4), the check that every message is exactly one frame within `frameBytesMax`, the
 * bounded buffer of Broadcasts that arrive before the owner `listen`s, and `SessionFault`.
 *
 * Never: signs, verifies or interprets a Broadcast (the `Outbox` and `Admission` do),
 * retries (callers back off, R38), or keeps a frame of a previous stream: one `Session` is
 * one stream with one challenge.
 */

import { HASH_BYTES } from "./bytes.js";
import { BpsError } from "./errors.js";
import { FRAME_BYTES_MAX_DEFAULT, type FrameMessageFault, decodeFrameMessage, describeFrameFault } from "./frame.js";
import { Status } from "./gen/bps_pb.js";
import { type Sleep, timerSleep } from "./sleep.js";
import { type Spec, joinFor } from "./spec.js";
import { type Link, type Transport, TransportError, type TransportFault, describeTransportFault } from "./transport.js";
import { decodeAck, describeDecodeFault, joinFrame } from "./wire.js";

/** Bound on waiting for the Ack after the Join, as the Rust client. */
export const HANDSHAKE_TIMEOUT_MS_DEFAULT = 10_000;
/**
 * Broadcasts held between the Ack and the owner's `listen` (normally none: the owner
 * listens in the same turn); a broker that floods a stream we do not read ends it.
 */
export const EARLY_FRAMES_MAX = 64;

/** Why a stream could not be opened, or ended. */
export type SessionFault =
  | { readonly code: "transport"; readonly fault: TransportFault }
  | { readonly code: "handshake-timeout"; readonly ms: number }
  | { readonly code: "frame"; readonly fault: FrameMessageFault }
  | { readonly code: "bad-ack"; readonly detail: string }
  | { readonly code: "early-frames-overflow"; readonly max: number };

/** Text for a session fault. */
export function describeSessionFault(fault: SessionFault): string {
  switch (fault.code) {
    case "transport":
      return describeTransportFault(fault.fault);
    case "handshake-timeout":
      return `no Ack within ${fault.ms} ms`;
    case "frame":
      return `bad frame from the broker: ${describeFrameFault(fault.fault)}`;
    case "bad-ack":
      return `bad Ack from the broker: ${fault.detail}`;
    case "early-frames-overflow":
      return `more than ${fault.max} frames before the stream was read`;
  }
}

/** A stream could not be opened. */
export class SessionError extends BpsError<SessionFault> {}

function sessionError(fault: SessionFault): SessionError {
  return new SessionError(fault, describeSessionFault(fault));
}

/** Options of one stream. */
export interface SessionOptions {
  readonly handshakeTimeoutMs?: number;
  /** Largest frame body accepted from the broker. */
  readonly frameBytesMax?: number;
  readonly sleep?: Sleep;
}

/** What the owner of an open stream is told. */
export interface SessionHandlers {
  /** One Broadcast frame's body (not yet decoded), in arrival order. */
  broadcast(body: Uint8Array): void;
  /** The stream ended without the owner's `close()`; called at most once, last. */
  ended(fault: SessionFault): void;
}

/** The broker's answer to a Join. */
export type JoinOutcome =
  { readonly ok: true; readonly session: Session } | { readonly ok: false; readonly status: Status.FULL | Status.REJECTED };

type Phase =
  | { readonly name: "handshake"; readonly settle: (outcome: JoinOutcome | SessionFault) => void }
  | { readonly name: "early"; readonly bodies: Uint8Array[] }
  | { readonly name: "listening"; readonly handlers: SessionHandlers }
  | { readonly name: "ended" };

/** An open stream after Ack{OK} (module docs). */
export class Session {
  readonly addr: Uint8Array;
  #challenge: Uint8Array = new Uint8Array(0);
  #link: Link | undefined;
  #phase: Phase;
  #endFault: SessionFault | undefined;
  readonly #frameBytesMax: number;

  private constructor(addr: Uint8Array, frameBytesMax: number, settle: (outcome: JoinOutcome | SessionFault) => void) {
    this.addr = addr.slice();
    this.#frameBytesMax = frameBytesMax;
    this.#phase = { name: "handshake", settle };
  }

  /**
   * Opens a link, sends `Join{spec, addr}` and reads the Ack. Resolves with the open
   * session or the refusal (FULL, REJECTED: the broker ends the stream, R5; back off before
   * retrying, R38); rejects with `SessionError`.
   */
  static join(transport: Transport, spec: Spec, addr: Uint8Array, options: SessionOptions = {}): Promise<JoinOutcome> {
    const timeoutMs = options.handshakeTimeoutMs ?? HANDSHAKE_TIMEOUT_MS_DEFAULT;
    const sleep = options.sleep ?? timerSleep;
    return new Promise((resolve, reject) => {
      const deadline = new AbortController();
      const settle = (outcome: JoinOutcome | SessionFault) => {
        deadline.abort();
        if ("ok" in outcome) resolve(outcome);
        else reject(sessionError(outcome));
      };
      const session = new Session(addr, options.frameBytesMax ?? FRAME_BYTES_MAX_DEFAULT, settle);
      transport
        .open({ message: (data) => session.#onMessage(data), closed: (fault) => session.#end({ code: "transport", fault }) })
        .then((link) => {
          if (session.#phase.name === "ended") return link.close();
          session.#link = link;
          link.send(joinFrame(joinFor(spec, addr)));
          void sleep(timeoutMs, deadline.signal).then(() => {
            if (!deadline.signal.aborted) session.#end({ code: "handshake-timeout", ms: timeoutMs });
          });
        })
        .catch((error: unknown) => {
          if (error instanceof TransportError) settle({ code: "transport", fault: error.fault });
          else settle({ code: "transport", fault: { code: "connect-failed", detail: String(error) } });
        });
    });
  }

  /** This stream's challenge from the Ack (R4): publishers sign under it. */
  get challenge(): Uint8Array {
    return this.#challenge;
  }

  /** Bytes sent and not yet handed to the network. */
  get bufferedBytes(): number {
    return this.#link?.bufferedBytes ?? 0;
  }

  /** Sends one encoded frame. Ignored once the stream has ended. */
  send(frame: Uint8Array): void {
    if (this.#phase.name !== "ended") this.#link?.send(frame);
  }

  /**
   * Starts delivering Broadcasts to `handlers`: first those that arrived since the Ack, in
   * order, then each as it comes. If the stream already ended, `ended` runs at once.
   */
  listen(handlers: SessionHandlers): void {
    const phase = this.#phase;
    if (phase.name === "ended") {
      if (this.#endFault !== undefined) handlers.ended(this.#endFault);
      return;
    }
    if (phase.name !== "early") throw new Error("listen: the session is already listened to");
    this.#phase = { name: "listening", handlers };
    for (const body of phase.bodies) {
      if (this.#phase.name !== "listening") return;
      handlers.broadcast(body);
    }
  }

  /** Ends the stream; no handler runs after this. */
  close(): void {
    this.#phase = { name: "ended" };
    this.#link?.close();
  }

  #onMessage(data: Uint8Array): void {
    const body = decodeFrameMessage(data, this.#frameBytesMax);
    if (!body.ok) return this.#end({ code: "frame", fault: body.fault });
    const phase = this.#phase;
    switch (phase.name) {
      case "handshake":
        return this.#onAck(body.value, phase.settle);
      case "early":
        if (phase.bodies.length >= EARLY_FRAMES_MAX) return this.#end({ code: "early-frames-overflow", max: EARLY_FRAMES_MAX });
        phase.bodies.push(body.value);
        return;
      case "listening":
        return phase.handlers.broadcast(body.value);
      case "ended":
        return;
    }
  }

  #onAck(body: Uint8Array, settle: (outcome: JoinOutcome | SessionFault) => void): void {
    const decoded = decodeAck(body);
    if (!decoded.ok) return this.#end({ code: "bad-ack", detail: describeDecodeFault(decoded.fault) });
    const { status, challenge } = decoded.value;
    switch (status) {
      case Status.OK:
        if (challenge.length !== HASH_BYTES) {
          return this.#end({ code: "bad-ack", detail: `OK with a ${challenge.length}-byte challenge, expected ${HASH_BYTES}` });
        }
        this.#challenge = challenge.slice();
        this.#phase = { name: "early", bodies: [] };
        return settle({ ok: true, session: this });
      case Status.FULL:
      case Status.REJECTED:
        this.close();
        return settle({ ok: false, status });
      case Status.STATUS_UNSPECIFIED:
        return this.#end({ code: "bad-ack", detail: "status STATUS_UNSPECIFIED" });
      default:
        return this.#end({ code: "bad-ack", detail: `unknown status ${status as number}` });
    }
  }

  #end(fault: SessionFault): void {
    const phase = this.#phase;
    if (phase.name === "ended") return;
    this.#phase = { name: "ended" };
    this.#endFault = fault;
    this.#link?.close();
    if (phase.name === "handshake") phase.settle(fault);
    if (phase.name === "listening") phase.handlers.ended(fault);
  }
}
