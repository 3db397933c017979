import { describe, expect, it, vi } from "vitest";

import {
  EARLY_FRAMES_MAX,
  type MemoryPeer,
  Session,
  SessionError,
  Status,
  TopicBinding,
  ackFrame,
  encodeFrame,
  joinFor,
  joinFrame,
  makeAck,
  memoryTransport,
  toHex,
} from "../src/index.js";
import { filled, key, spec } from "./fixtures.js";

const cohort = spec(key(1), TopicBinding.FEED_TOPIC);
const addr = filled(3, 20);

/** A transport whose far end answers the Join with `reply` (raw messages) and records what it got. */
function scripted(reply: (peer: MemoryPeer) => void) {
  const received: Uint8Array[] = [];
  const transport = memoryTransport((peer) => {
    peer.onMessage = (message) => {
      received.push(message);
      if (received.length === 1) reply(peer);
    };
  });
  return { transport, received };
}

async function fault(promise: Promise<unknown>): Promise<SessionError["fault"]> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(SessionError);
  return (error as SessionError).fault;
}

describe("Session", () => {
  it("sends the Join frame, reads the challenge, then delivers Broadcast bodies in order", async () => {
    const { transport, received } = scripted((peer) => {
      peer.send(ackFrame(makeAck(Status.OK, filled(9))));
      peer.send(encodeFrame(Uint8Array.of(1)));
      peer.send(encodeFrame(Uint8Array.of(2)));
    });
    const outcome = await Session.join(transport, cohort, addr);
    if (!outcome.ok) throw new Error("refused");
    expect(toHex(received[0]!)).toBe(toHex(joinFrame(joinFor(cohort, addr))));
    expect(toHex(outcome.session.challenge)).toBe(toHex(filled(9)));
    const bodies: number[] = [];
    outcome.session.listen({ broadcast: (body) => bodies.push(body[0]!), ended: () => undefined });
    await vi.waitFor(() => expect(bodies).toEqual([1, 2]));
  });

  it("reports FULL and REJECTED as refusals", async () => {
    for (const status of [Status.FULL, Status.REJECTED]) {
      const { transport } = scripted((peer) => peer.send(ackFrame(makeAck(status))));
      expect(await Session.join(transport, cohort, addr)).toEqual({ ok: false, status });
    }
  });

  it("refuses a malformed Ack, a message that is not one frame, and a silent broker", async () => {
    const short = scripted((peer) => peer.send(ackFrame(makeAck(Status.OK, filled(1, 31)))));
    expect(await fault(Session.join(short.transport, cohort, addr))).toEqual({
      code: "bad-ack",
      detail: "OK with a 31-byte challenge, expected 32",
    });
    const unspecified = scripted((peer) => peer.send(ackFrame(makeAck(Status.STATUS_UNSPECIFIED, filled(1)))));
    expect(await fault(Session.join(unspecified.transport, cohort, addr))).toEqual({
      code: "bad-ack",
      detail: "status STATUS_UNSPECIFIED",
    });
    const two = scripted((peer) => peer.send(Uint8Array.of(...ackFrame(makeAck(Status.FULL)), 0)));
    expect(await fault(Session.join(two.transport, cohort, addr))).toEqual({
      code: "frame",
      fault: { code: "frame-trailing-bytes", extra: 1 },
    });
    const closed = scripted((peer) => peer.close(1011, "going away"));
    expect(await fault(Session.join(closed.transport, cohort, addr))).toEqual({
      code: "transport",
      fault: { code: "closed-by-peer", closeCode: 1011, reason: "going away" },
    });
    const silent = scripted(() => undefined);
    expect(await fault(Session.join(silent.transport, cohort, addr, { handshakeTimeoutMs: 5, sleep: () => Promise.resolve() }))).toEqual({
      code: "handshake-timeout",
      ms: 5,
    });
  });

  it("bounds the frames held before listen, and reports a later reset once", async () => {
    const { transport } = scripted((peer) => {
      peer.send(ackFrame(makeAck(Status.OK, filled(9))));
      for (let count = 0; count <= EARLY_FRAMES_MAX; count++) peer.send(encodeFrame(Uint8Array.of(count)));
    });
    const outcome = await Session.join(transport, cohort, addr);
    if (!outcome.ok) throw new Error("refused");
    // Let every frame arrive before anyone listens.
    await new Promise((resolve) => setTimeout(resolve, 0));
    const ends: unknown[] = [];
    outcome.session.listen({ broadcast: () => undefined, ended: (ended) => ends.push(ended) });
    expect(ends).toEqual([{ code: "early-frames-overflow", max: EARLY_FRAMES_MAX }]);
  });
});
