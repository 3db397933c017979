/**
 * A scripted far end for the in-memory transport, tests only. It answers each Join with
 * the Ack the test chose (OK with a fresh challenge by default) and relays every later
 * frame, byte for byte, to every other stream it holds. It is deliberately not a broker:
 * it checks nothing (no roles, no signatures, no cursors), so every verdict in these tests
 * is the client library's own. The one broker behaviour it can imitate on request is R22
 * (the latest ROSTER frame goes first to a newly joined stream), to exercise the client's
 * reaction to it.
 */

import {
  FRAME_BYTES_MAX_DEFAULT,
  type Join,
  Kind,
  type MemoryPeer,
  Status,
  type Transport,
  ackFrame,
  decodeBroadcast,
  decodeFrameMessage,
  decodeJoin,
  makeAck,
  memoryTransport,
  toHex,
} from "../src/index.js";

export interface RelayStream {
  readonly join: Join;
  readonly addr: string;
  readonly challenge: Uint8Array;
  readonly peer: MemoryPeer;
  /** Every frame this stream sent after its Join. */
  readonly frames: Uint8Array[];
}

export class Relay {
  readonly transport: Transport;
  readonly streams: RelayStream[] = [];
  /** The status each Join gets, in order; OK once the list is empty. */
  readonly statuses: Status[] = [];
  /** Imitate R22: send the latest ROSTER frame to each newly joined stream. */
  replayRoster = false;
  #latestRoster: Uint8Array | undefined;
  #challenges = 0;

  constructor() {
    this.transport = memoryTransport((peer) => this.#accept(peer));
  }

  /** The streams that joined as `addr` (hex), oldest first. */
  of(addr: Uint8Array): RelayStream[] {
    return this.streams.filter((stream) => stream.addr === toHex(addr));
  }

  /** The kinds of the frames a stream sent. */
  static kinds(stream: RelayStream): Kind[] {
    return stream.frames.map((frame) => {
      const body = decodeFrameMessage(frame, FRAME_BYTES_MAX_DEFAULT);
      const broadcast = body.ok ? decodeBroadcast(body.value) : undefined;
      return broadcast?.ok ? broadcast.value.kind : Kind.KIND_UNSPECIFIED;
    });
  }

  #accept(peer: MemoryPeer): void {
    let stream: RelayStream | undefined;
    peer.onMessage = (message) => {
      if (stream === undefined) {
        stream = this.#join(peer, message);
        return;
      }
      stream.frames.push(message);
      const body = decodeFrameMessage(message, FRAME_BYTES_MAX_DEFAULT);
      const broadcast = body.ok ? decodeBroadcast(body.value) : undefined;
      if (broadcast?.ok && broadcast.value.kind === Kind.ROSTER) this.#latestRoster = message;
      for (const other of this.streams) if (other !== stream && !other.peer.ended) other.peer.send(message);
    };
  }

  #join(peer: MemoryPeer, message: Uint8Array): RelayStream | undefined {
    const body = decodeFrameMessage(message, FRAME_BYTES_MAX_DEFAULT);
    const join = body.ok ? decodeJoin(body.value) : undefined;
    if (!join?.ok) throw new Error("the first frame is not a Join");
    const status = this.statuses.shift() ?? Status.OK;
    if (status !== Status.OK) {
      peer.send(ackFrame(makeAck(status)));
      peer.close();
      return undefined;
    }
    this.#challenges += 1;
    const challenge = new Uint8Array(32).fill(this.#challenges);
    const stream: RelayStream = { join: join.value, addr: toHex(join.value.addr), challenge, peer, frames: [] };
    this.streams.push(stream);
    peer.send(ackFrame(makeAck(Status.OK, challenge)));
    if (this.replayRoster && this.#latestRoster !== undefined) peer.send(this.#latestRoster);
    return stream;
  }
}

/** A sleep that records the delay and returns at once (backoff in tests). */
export function instantSleep(delays: number[] = []): (ms: number) => Promise<void> {
  return (ms) => {
    delays.push(ms);
    return Promise.resolve();
  };
}
