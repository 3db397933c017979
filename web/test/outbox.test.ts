import { describe, expect, it } from "vitest";

import {
  Backoff,
  BACKOFF_MAX_MS,
  BACKOFF_MIN_MS,
  CHUNK_SIZE,
  IndexSequences,
  Kind,
  MemoryStore,
  PayloadError,
  PublishError,
  PublisherError,
  SequenceError,
  TopicBinding,
  checkImplicit,
  decodeBroadcast,
  decodeFrameMessage,
  encodeRoster,
  feedId,
  keccak256,
  makeSpec,
  parseSoc,
  proximity,
  PO_MIN,
  sessionChunkId,
  socAddress,
  spanValue,
  toHex,
  utf8,
  validateSoc,
} from "../src/index.js";
import { TOPIC, data, filled, key, outbox, socIdTopicFor, spec, thrownBy, written } from "./fixtures.js";

const admin = key(1);
const member = key(2);
const explicit = spec(admin, TopicBinding.FEED_TOPIC);
const summary = (frames: ReturnType<typeof written>) => frames.map((frame) => [Kind[frame.kind], frame.index]);

describe("Outbox", () => {
  it("D3: the admin claims with an empty AUTH at index 0 first", () => {
    const writer = outbox(explicit, admin);
    writer.enqueue(data(utf8("hello"), 7n));
    expect(writer.nextFrame(), "no stream yet").toBeUndefined();
    writer.beginSession(filled(1));
    expect(writer.role).toBe("pending");
    const frames = written(writer);
    expect(summary(frames)).toEqual([
      ["AUTH", 0n],
      ["DATA", 7n],
    ]);
    expect(writer.role).toBe("publisher");
    const auth = frames[0]!;
    expect(toHex(auth.id)).toBe(toHex(sessionChunkId(Kind.AUTH, TOPIC, filled(1), 0n)));
    const soc = parseSoc(auth.signed.chunk);
    if (!soc.ok) throw new Error("soc");
    expect([spanValue(soc.value), soc.value.payload.length]).toEqual([0n, 0]);
    const valid = validateSoc(auth.signed.chunk);
    expect(valid.ok && toHex(valid.value.owner)).toBe(toHex(admin.address));
    expect(toHex(auth.address)).toBe(toHex(socAddress(auth.id, admin.address)));
    const body = decodeFrameMessage(auth.signed.frame, 8192);
    if (!body.ok) throw new Error("frame");
    const decoded = decodeBroadcast(body.value);
    expect(decoded.ok && decoded.value.kind).toBe(Kind.AUTH);
  });

  it("R41: signs every chunk under the current challenge; what a reset interrupted is signed again", () => {
    const writer = outbox(explicit, admin);
    for (const [index, payload] of ["a", "b", "c"].entries()) writer.enqueue(data(utf8(payload), BigInt(index)));
    writer.beginSession(filled(1));
    writer.nextFrame();
    writer.markSent();
    const first = writer.nextFrame()!;
    writer.markSent();
    expect(toHex(first.id)).toBe(toHex(sessionChunkId(Kind.DATA, TOPIC, filled(1), 0n)));
    const lost = writer.nextFrame()!;
    expect(lost.index).toBe(1n);
    writer.endSession();
    expect(writer.queued).toBe(2);
    writer.beginSession(filled(2));
    const frames = written(writer);
    expect(summary(frames)).toEqual([
      ["AUTH", 0n],
      ["DATA", 1n],
      ["DATA", 2n],
    ]);
    for (const frame of frames) {
      expect(toHex(frame.id)).toBe(toHex(sessionChunkId(frame.kind as Kind.DATA, TOPIC, filled(2), frame.index!)));
      expect(toHex(frame.signed.broadcast.challenge)).toBe(toHex(filled(2)));
    }
    expect(toHex(frames[1]!.signed.chunk)).not.toBe(toHex(lost.signed.chunk));
  });

  it("ALL and implicit publish from the Join without a claim; implicit has no salt", () => {
    const all = spec(admin, TopicBinding.MNEMONIC, { all: true });
    for (const signer of [admin, member]) {
      const writer = outbox(all, signer);
      writer.beginSession(filled(1));
      expect(writer.role).toBe("publisher");
      writer.enqueue(data(utf8("x"), 3n));
      expect(summary(written(writer))).toEqual([["DATA", 3n]]);
    }
    const implicit = outbox(spec(undefined, TopicBinding.MNEMONIC), member);
    implicit.beginSession(filled(1));
    implicit.enqueue(data(utf8("x"), 0n));
    const frames = written(implicit);
    expect(summary(frames)).toEqual([["DATA", undefined]]);
    expect(frames[0]!.signed.broadcast.challenge.length, "no salt").toBe(0);
    expect(frames[0]!.signed.broadcast.index, "index unset").toBe(0n);
  });

  it("a rostered publisher waits for a roster naming it, claims, and stops when revoked", () => {
    const writer = outbox(explicit, member);
    writer.enqueue(data(utf8("hi"), 0n));
    writer.beginSession(filled(1));
    expect(writer.role).toBe("awaiting-roster");
    expect(writer.nextFrame(), "R23: nothing before the roster").toBeUndefined();
    expect(writer.onRoster([filled(7, 20)])).toBe("awaiting-roster");
    expect(writer.onRoster([filled(7, 20), member.address])).toBe("pending");
    expect(summary(written(writer))).toEqual([
      ["AUTH", 0n],
      ["DATA", 0n],
    ]);
    expect(writer.onRoster([filled(7, 20)])).toBe("revoked");
    writer.enqueue(data(utf8("late"), 1n));
    expect(writer.nextFrame(), "R24: nothing after revocation").toBeUndefined();
    expect(writer.onRoster([member.address]), "a re-grant claims again").toBe("pending");
    writer.beginSession(filled(2));
    expect(writer.role, "a new stream waits for a naming roster again").toBe("awaiting-roster");
  });

  it("service kinds are the admin's; payloads and the queue are bounded", () => {
    const writer = outbox(explicit, member);
    expect(thrownBy(() => writer.enqueue({ kind: Kind.ROSTER, index: 0n, payload: encodeRoster([]) }))).toMatchObject({
      fault: { code: "not-admin" },
    });
    expect(() => writer.enqueue({ kind: Kind.EOS, index: 0n, payload: new Uint8Array(0) })).toThrow(PublishError);
    const implicit = outbox(spec(undefined, TopicBinding.MNEMONIC), member, { queuedPublicationsMax: 2 });
    expect(implicit.refusal(Kind.EOS)).toEqual({ code: "no-admin" });
    expect(() => implicit.enqueue(data(new Uint8Array(CHUNK_SIZE + 1)))).toThrow(PayloadError);
    implicit.enqueue(data(utf8("1")));
    implicit.enqueue(data(utf8("2")));
    expect(thrownBy(() => implicit.enqueue(data(utf8("3"))))).toMatchObject({ fault: { code: "queue-full", max: 2 } });
    expect(() => implicit.enqueue(data(utf8("x"), (1n << 64n) - 1n))).toThrow(PublishError);

    const admins = outbox(explicit, admin);
    admins.enqueue({ kind: Kind.EOS, index: 0n, payload: new Uint8Array(0) });
    admins.beginSession(filled(1));
    const frames = written(admins);
    expect(summary(frames)).toEqual([
      ["AUTH", 0n],
      ["EOS", 0n],
    ]);
    const eos = parseSoc(frames[1]!.signed.chunk);
    expect(eos.ok && [spanValue(eos.value), eos.value.payload.length]).toEqual([0n, 0]);
  });

  it("implicit bindings sign their own ids, which the shape check accepts", () => {
    const signer = key(3);
    const anchorId = filled(0x77);
    const cases = [
      { cohort: spec(undefined, TopicBinding.FEED_TOPIC) },
      { cohort: spec(undefined, TopicBinding.MNEMONIC) },
      { cohort: makeSpec({ topic: keccak256(signer.address), binding: TopicBinding.OWNER }) },
      { cohort: makeSpec({ topic: socAddress(anchorId, signer.address), binding: TopicBinding.ANCHOR }), anchorId },
      { cohort: makeSpec({ topic: socIdTopicFor(signer.address), binding: TopicBinding.SOC_ID }) },
    ];
    for (const { cohort, anchorId: id } of cases) {
      const writer = outbox(cohort, signer, id === undefined ? {} : { anchorId: id });
      writer.beginSession(filled(1));
      writer.enqueue(data(utf8("one"), 40n));
      writer.enqueue(data(utf8("two"), 41n));
      const frames = written(writer);
      expect(frames.length).toBe(2);
      for (const frame of frames) {
        expect(frame.signed.broadcast.challenge.length).toBe(0);
        const valid = validateSoc(frame.signed.chunk);
        if (!valid.ok) throw new Error(valid.fault.code);
        const shaped = checkImplicit(cohort.binding, cohort.topic, frame.signed.broadcast.index, valid.value);
        expect(shaped.ok, TopicBinding[cohort.binding]).toBe(true);
      }
      const ids = frames.map((frame) => toHex(frame.id));
      switch (cohort.binding) {
        case TopicBinding.FEED_TOPIC:
          expect(summary(frames)).toEqual([
            ["DATA", 40n],
            ["DATA", 41n],
          ]);
          expect(ids[0]).toBe(toHex(feedId(TOPIC, 40n)));
          break;
        case TopicBinding.MNEMONIC:
          expect(summary(frames)).toEqual([
            ["DATA", undefined],
            ["DATA", undefined],
          ]);
          expect(ids[0]).toBe(toHex(feedId(TOPIC, 40n)));
          break;
        case TopicBinding.OWNER:
          expect(ids[0]).not.toBe(ids[1]);
          expect(proximity(frames[0]!.address, cohort.topic)).toBeGreaterThanOrEqual(PO_MIN);
          break;
        case TopicBinding.ANCHOR:
          expect(ids).toEqual([toHex(anchorId), toHex(anchorId)]);
          break;
        case TopicBinding.SOC_ID:
          expect(ids[1]).toBe(toHex(cohort.topic));
          break;
      }
    }
  });

  it("refuses keys that do not fit an implicit shape up front", () => {
    const signer = key(3);
    const codes = (make: () => unknown) => {
      try {
        make();
      } catch (error) {
        expect(error).toBeInstanceOf(PublisherError);
        return (error as PublisherError).fault.code;
      }
      return "accepted";
    };
    expect(codes(() => outbox(spec(undefined, TopicBinding.OWNER), signer))).toBe("owner-not-topic");
    expect(codes(() => outbox(spec(undefined, TopicBinding.ANCHOR), signer))).toBe("anchor-without-id");
    expect(codes(() => outbox(spec(undefined, TopicBinding.ANCHOR), signer, { anchorId: filled(1) }))).toBe("anchor-mismatch");
    expect(proximity(socAddress(TOPIC, signer.address), TOPIC)).toBeLessThan(PO_MIN);
    expect(codes(() => outbox(spec(undefined, TopicBinding.SOC_ID), signer))).toBe("soc-id-proximity");
    expect(
      codes(() => outbox(spec(admin, TopicBinding.SOC_ID), signer)),
      "explicit authorship has no shape",
    ).toBe("accepted");
  });
});

describe("IndexSequences (R41: never reuse a DATA or ROSTER index)", () => {
  const sequences = (store: MemoryStore, first = 100n) =>
    new IndexSequences({ store, topic: TOPIC, admin: admin.address, owner: member.address, firstIndex: () => first });

  it("persist the next index before handing one out, per kind, and continue in a new instance", async () => {
    const store = new MemoryStore();
    const one = sequences(store);
    const reserved = await Promise.all([one.reserve(Kind.DATA), one.reserve(Kind.DATA), one.reserve(Kind.ROSTER)]);
    expect(reserved).toEqual([100n, 101n, 100n]);
    expect(store.get(one.key(Kind.DATA))).toBe("102");
    expect(one.key(Kind.DATA)).toBe(`bps/v1/publisher/${toHex(TOPIC)}/${toHex(admin.address)}/${toHex(member.address)}/data`);
    const two = sequences(store, 0n);
    expect(await two.reserve(Kind.DATA), "a reload continues the sequence").toBe(102n);
    expect(await two.reserve(Kind.ROSTER)).toBe(101n);
  });

  it("stop below 2^64-1 and refuse a corrupt or failing store", async () => {
    const store = new MemoryStore();
    const sequence = sequences(store, (1n << 64n) - 2n);
    expect(await sequence.reserve(Kind.DATA)).toBe((1n << 64n) - 2n);
    await expect(sequence.reserve(Kind.DATA)).rejects.toMatchObject({ fault: { code: "index-exhausted", kind: Kind.DATA } });
    store.set(sequences(store).key(Kind.ROSTER), "12x");
    await expect(sequences(store).reserve(Kind.ROSTER)).rejects.toBeInstanceOf(SequenceError);
    const failing = new IndexSequences({
      store: { get: () => undefined, set: () => Promise.reject(new Error("quota")) },
      topic: TOPIC,
      admin: undefined,
      owner: member.address,
    });
    await expect(failing.reserve(Kind.DATA)).rejects.toMatchObject({ fault: { code: "index-store-failed" } });
    await expect(failing.reserve(Kind.DATA), "a failure does not block the queue").rejects.toBeInstanceOf(SequenceError);
  });

  it("start at the Unix time in milliseconds without a stored value", async () => {
    const before = BigInt(Date.now());
    const index = await new IndexSequences({ store: new MemoryStore(), topic: TOPIC, admin: undefined, owner: member.address }).reserve(
      Kind.DATA,
    );
    expect(index >= before && index <= BigInt(Date.now())).toBe(true);
  });
});

describe("Backoff (R38)", () => {
  /** A seeded xorshift32, so schedules repeat. */
  const seeded = (seed: number) => {
    let state = seed >>> 0 || 1;
    return (bound: number) => {
      state ^= state << 13;
      state >>>= 0;
      state ^= state >>> 17;
      state ^= state << 5;
      state >>>= 0;
      return state % bound;
    };
  };

  it("is randomised exponential within 1-30 s with full jitter", () => {
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((attempt) => Backoff.ceilingMs(attempt) / 1000)).toEqual([2, 4, 8, 16, 30, 30, 30, 30]);
    const backoff = new Backoff(seeded(38));
    for (let attempt = 0; attempt < 64; attempt++) {
      expect(backoff.attempt).toBe(attempt);
      const delay = backoff.nextDelayMs();
      expect(delay).toBeGreaterThanOrEqual(BACKOFF_MIN_MS);
      expect(delay).toBeLessThanOrEqual(Backoff.ceilingMs(attempt));
      expect(Number.isInteger(delay)).toBe(true);
    }
    const schedule = (seed: number) => {
      const fresh = new Backoff(seeded(seed));
      return Array.from({ length: 10 }, () => fresh.nextDelayMs());
    };
    expect(schedule(7)).toEqual(schedule(7));
    expect(schedule(7)).not.toEqual(schedule(8));
  });

  it("spreads draws at the cap over the whole range, and reset starts over", () => {
    const capped = new Backoff(); // the real CSPRNG
    const buckets = new Array<number>(29).fill(0);
    let sum = 0;
    const draws = 10_000;
    for (let draw = 0; draw < draws; draw++) {
      for (let skip = 0; skip < 5; skip++) capped.nextDelayMs();
      const delay = capped.nextDelayMs();
      capped.reset();
      sum += delay;
      buckets[Math.min(Math.floor((delay - 1000) / 1000), 28)]! += 1;
      expect(delay).toBeLessThanOrEqual(BACKOFF_MAX_MS);
    }
    for (const count of buckets) expect(count).toBeGreaterThan(200);
    expect(sum / draws).toBeGreaterThan(15_000);
    expect(sum / draws).toBeLessThan(16_000);
    const first = new Backoff();
    const firsts = Array.from({ length: 50 }, () => {
      const delay = first.nextDelayMs();
      first.reset();
      return delay;
    });
    expect(firsts.some((delay) => delay > 1500) && firsts.some((delay) => delay < 1500)).toBe(true);
    expect(firsts.every((delay) => delay <= 2000)).toBe(true);
  });
});
