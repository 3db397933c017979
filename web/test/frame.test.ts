import { describe, expect, it } from "vitest";

import {
  BROADCAST_FRAME_BYTES_MAX,
  FRAME_BYTES_MAX_DEFAULT,
  FrameReader,
  Kind,
  Status,
  TopicBinding,
  ackFrame,
  broadcastFrame,
  decodeAck,
  decodeBroadcast,
  decodeFrameMessage,
  decodeJoin,
  encodeBroadcast,
  encodeFrame,
  fromHex,
  joinFor,
  joinFrame,
  makeAck,
  makeBroadcast,
  makeSpec,
  peekFrame,
  toHex,
} from "../src/index.js";

/** `count` copies of `byte` as hex. */
const run = (byte: number, count: number) => byte.toString(16).padStart(2, "0").repeat(count);
const unhex = (spaced: string) => fromHex(spaced.replace(/\s+/g, ""));

const TOPIC = new Uint8Array(32).fill(0x11);
const ADMIN = new Uint8Array(20).fill(0xaa);
const ADDR = new Uint8Array(20).fill(0xbb);
const CHALLENGE = new Uint8Array(32).fill(0xcc);

/** The golden frames of proto/tests/golden.rs, worked out by hand there from the protobuf rules. */
const GOLDEN = {
  joinExplicitFeedTopic: unhex(`52 0a 3a 0a 20 ${run(0x11, 32)} 10 04 1a 14 ${run(0xaa, 20)} 12 14 ${run(0xbb, 20)}`),
  joinAllMnemonicHistory: unhex(`56 0a 3e 0a 20 ${run(0x11, 32)} 10 05 1a 14 ${run(0xaa, 20)} 20 01 28 01 12 14 ${run(0xbb, 20)}`),
  ackOk: unhex(`24 08 01 12 20 ${run(0xcc, 32)}`),
  ackFull: unhex("02 08 02"),
  ackRejected: unhex("02 08 03"),
  broadcastSmall: unhex(`2c 0a 03 01 02 03 10 01 1a 20 ${run(0xcc, 32)} 20 ac 02`),
  broadcastImplicit: unhex("07 0a 03 01 02 03 10 01"),
  broadcastLargest: unhex(`9b 21 0a e9 20 ${run(0x5a, 4201)} 10 04 1a 20 ${run(0xcc, 32)} 20 ff ff ff ff ff ff ff ff ff 01`),
};

describe("golden frames (proto/tests/golden.rs)", () => {
  it("encodes Join frames byte for byte", () => {
    const explicit = makeSpec({ topic: TOPIC, binding: TopicBinding.FEED_TOPIC, admin: ADMIN });
    expect(toHex(joinFrame(joinFor(explicit, ADDR)))).toBe(toHex(GOLDEN.joinExplicitFeedTopic));
    const all = makeSpec({ topic: TOPIC, binding: TopicBinding.MNEMONIC, admin: ADMIN, all: true, history: true });
    expect(toHex(joinFrame(joinFor(all, ADDR)))).toBe(toHex(GOLDEN.joinAllMnemonicHistory));
  });

  it("encodes and decodes Ack frames", () => {
    expect(toHex(ackFrame(makeAck(Status.OK, CHALLENGE)))).toBe(toHex(GOLDEN.ackOk));
    expect(toHex(ackFrame(makeAck(Status.FULL)))).toBe(toHex(GOLDEN.ackFull));
    expect(toHex(ackFrame(makeAck(Status.REJECTED)))).toBe(toHex(GOLDEN.ackRejected));
    const body = decodeFrameMessage(GOLDEN.ackOk, FRAME_BYTES_MAX_DEFAULT);
    if (!body.ok) throw new Error("frame");
    const ack = decodeAck(body.value);
    expect(ack.ok && ack.value.status).toBe(Status.OK);
    expect(ack.ok && toHex(ack.value.challenge)).toBe(run(0xcc, 32));
  });

  it("encodes Broadcast frames, small, implicit and the largest valid one", () => {
    const small = makeBroadcast({ soc: Uint8Array.of(1, 2, 3), kind: Kind.DATA, challenge: CHALLENGE, index: 300n });
    expect(toHex(broadcastFrame(small))).toBe(toHex(GOLDEN.broadcastSmall));
    const implicit = makeBroadcast({ soc: Uint8Array.of(1, 2, 3), kind: Kind.DATA, challenge: new Uint8Array(0), index: 0n });
    expect(toHex(broadcastFrame(implicit))).toBe(toHex(GOLDEN.broadcastImplicit));
    const largest = makeBroadcast({
      soc: new Uint8Array(4201).fill(0x5a),
      kind: Kind.EOS,
      challenge: CHALLENGE,
      index: (1n << 64n) - 1n,
    });
    expect(toHex(broadcastFrame(largest))).toBe(toHex(GOLDEN.broadcastLargest));
    expect(encodeBroadcast(largest).length).toBe(BROADCAST_FRAME_BYTES_MAX);
    const decoded = decodeBroadcast(encodeBroadcast(largest));
    expect(decoded.ok && decoded.value.index).toBe((1n << 64n) - 1n);
  });

  it("keeps an unknown kind as its number", () => {
    const body = decodeFrameMessage(unhex("05 0a 01 aa 10 07"), FRAME_BYTES_MAX_DEFAULT);
    if (!body.ok) throw new Error("frame");
    const broadcast = decodeBroadcast(body.value);
    expect(broadcast.ok && broadcast.value.kind).toBe(7);
  });

  it("reports a truncated body as malformed, naming the message", () => {
    const join = decodeJoin(Uint8Array.of(0x0a, 0x05));
    expect(join.ok).toBe(false);
    if (!join.ok) expect(join.fault).toMatchObject({ code: "malformed", frame: "Join", bytes: 2 });
  });
});

describe("FrameReader", () => {
  const frames = Object.values(GOLDEN);
  const stream = Uint8Array.from(frames.flatMap((frame) => [...frame]));
  const bodies = frames.map((frame) => {
    const body = decodeFrameMessage(frame, FRAME_BYTES_MAX_DEFAULT);
    if (!body.ok) throw new Error("golden frame");
    return toHex(body.value);
  });

  function readAll(pieces: Uint8Array[]): string[] {
    const reader = new FrameReader();
    const out: string[] = [];
    for (const piece of pieces) {
      reader.push(piece);
      for (;;) {
        const next = reader.next();
        if (!next.ok) throw new Error(next.fault.code);
        if (next.value === undefined) break;
        out.push(toHex(next.value));
      }
    }
    expect(reader.buffered).toBe(0);
    return out;
  }

  it("decodes every frame the same when the stream is split at every byte boundary", () => {
    for (let split = 0; split <= stream.length; split++) {
      expect(readAll([stream.subarray(0, split), stream.subarray(split)])).toEqual(bodies);
    }
  });

  it("decodes the same when every byte arrives alone", () => {
    expect(readAll([...stream].map((byte) => Uint8Array.of(byte)))).toEqual(bodies);
  });

  it("refuses an oversize length as soon as the varint is complete, before any body byte", () => {
    const reader = new FrameReader(100);
    reader.push(Uint8Array.of(0xe5, 0x00)); // 101 declared (0x65 | 0x80, then 0)
    expect(reader.next()).toEqual({ ok: false, fault: { code: "frame-too-large", bytes: 101n, max: 100 } });
    const declaredHuge = peekFrame(Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0x0f), FRAME_BYTES_MAX_DEFAULT);
    expect(declaredHuge).toEqual({ ok: false, fault: { code: "frame-too-large", bytes: 0xffffffffn, max: FRAME_BYTES_MAX_DEFAULT } });
    // Exactly at the cap is fine, and only "need more" until the body is there.
    expect(peekFrame(Uint8Array.of(0x64), 100)).toEqual({ ok: true, value: { prefixBytes: 1, bodyBytes: 100 } });
  });

  it("refuses a varint of more than 10 bytes or beyond 64 bits", () => {
    expect(peekFrame(new Uint8Array(10).fill(0x80), 1 << 30)).toEqual({ ok: false, fault: { code: "varint-too-long" } });
    expect(peekFrame(Uint8Array.of(...new Array<number>(9).fill(0xff), 0x02), 1 << 30)).toEqual({
      ok: false,
      fault: { code: "varint-overflow" },
    });
    expect(peekFrame(Uint8Array.of(0x80, 0x80), 100)).toEqual({ ok: true, value: undefined });
  });
});

describe("decodeFrameMessage", () => {
  it("needs exactly one frame per message", () => {
    const frame = encodeFrame(Uint8Array.of(1, 2, 3));
    expect(toHex(frame)).toBe("03010203");
    expect(decodeFrameMessage(frame.subarray(0, 3), 100)).toEqual({
      ok: false,
      fault: { code: "frame-incomplete", declared: 3, present: 2 },
    });
    expect(decodeFrameMessage(Uint8Array.of(...frame, 9), 100)).toEqual({
      ok: false,
      fault: { code: "frame-trailing-bytes", extra: 1 },
    });
    expect(decodeFrameMessage(frame, 2)).toEqual({ ok: false, fault: { code: "frame-too-large", bytes: 3n, max: 2 } });
    const body = decodeFrameMessage(frame, 100);
    expect(body.ok && toHex(body.value)).toBe("010203");
  });

  it("encodes multi-byte length prefixes", () => {
    expect(toHex(encodeFrame(new Uint8Array(300)).subarray(0, 2))).toBe("ac02");
    expect(toHex(encodeFrame(new Uint8Array(128)).subarray(0, 2))).toBe("8001");
    expect(toHex(encodeFrame(new Uint8Array(127)).subarray(0, 1))).toBe("7f");
  });
});
