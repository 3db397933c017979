import { describe, expect, it } from "vitest";

import {
  Admission,
  type DataVerdict,
  Kind,
  TopicBinding,
  type Verdict,
  broadcastFrame,
  encodeBroadcast,
  encodeRoster,
  feedId,
  keccak256,
  makeBroadcast,
  type Outgoing,
  be64,
  makeSpec,
  proximity,
  PO_MIN,
  signBroadcast,
  signImplicit,
  signSoc,
  socAddress,
  toHex,
  utf8,
} from "../src/index.js";
import { TOPIC, data, delivered, filled, key, outbox, reason, socIdTopicFor, spec, written } from "./fixtures.js";

const admin = key(1);
const member = key(2);
const stranger = key(9);
const explicit = spec(admin, TopicBinding.FEED_TOPIC);

function asData(verdict: Verdict): DataVerdict {
  if (verdict.type !== "data")
    throw new Error(`expected data, got ${JSON.stringify(verdict, (_, v: unknown) => (typeof v === "bigint" ? `${v}` : v))}`);
  return verdict;
}

const hex = (bytes: Uint8Array | undefined) => (bytes === undefined ? undefined : toHex(bytes));

describe("Admission accepts what a publisher produces", () => {
  it("explicit: data, roster, data, eos, with cursors", () => {
    const admission = new Admission(explicit);
    const writer = outbox(explicit, admin);
    writer.enqueue(data(utf8("first"), 10n));
    writer.enqueue({ kind: Kind.ROSTER, index: 0n, payload: encodeRoster([filled(5, 20)]) });
    writer.enqueue(data(utf8("second"), 11n));
    writer.enqueue({ kind: Kind.EOS, index: 0n, payload: new Uint8Array(0) });
    const verdicts = delivered(writer, filled(1)).map((broadcast) => admission.onBroadcast(broadcast));
    expect(verdicts.map((verdict) => verdict.type)).toEqual(["data", "roster", "data", "eos"]);
    expect(asData(verdicts[0]!)).toMatchObject({ index: 10n, payload: utf8("first") });
    expect(hex(asData(verdicts[0]!).owner)).toBe(hex(admin.address));
    expect(admission.cursor(admin.address)).toBe(12n);
    expect(admission.rosterCursor).toBe(1n);
    expect(admission.roster.map(toHex)).toEqual([hex(filled(5, 20))]);
  });

  it("compares the challenge with nothing: each id comes from the frame's own challenge", () => {
    const admission = new Admission(explicit);
    const writer = outbox(explicit, admin);
    writer.enqueue(data(utf8("a"), 0n));
    const first = delivered(writer, filled(0xaa));
    writer.enqueue(data(utf8("b"), 1n));
    const second = delivered(writer, filled(0xbb));
    expect(asData(admission.onBroadcast(first[0]!)).payload).toEqual(utf8("a"));
    expect(asData(admission.onBroadcast(second[0]!)).payload).toEqual(utf8("b"));
    // The wire form decodes to the same verdict.
    const fresh = new Admission(explicit);
    expect(asData(fresh.onFrame(encodeBroadcast(first[0]!))).index).toBe(0n);
    expect(broadcastFrame(first[0]!).length).toBeGreaterThan(encodeBroadcast(first[0]!).length);
  });
});

describe("Admission drops with a typed reason", () => {
  const writer = outbox(explicit, admin);
  writer.enqueue(data(utf8("x"), 4n));
  const genuine = delivered(writer, filled(1))[0]!;

  it("derives the id from kind, topic, challenge and index", () => {
    const tampered = [
      makeBroadcast({ ...genuine, index: 5n }),
      makeBroadcast({ ...genuine, challenge: filled(2) }),
      makeBroadcast({ ...genuine, kind: Kind.ROSTER }),
    ];
    for (const broadcast of tampered) expect(reason(new Admission(explicit).onBroadcast(broadcast)).code).toBe("id-mismatch");
    const elsewhere = new Admission(makeSpec({ ...explicit, topic: filled(0x43) }));
    expect(reason(elsewhere.onBroadcast(genuine)).code).toBe("id-mismatch");
    expect(reason(new Admission(explicit).onBroadcast(makeBroadcast({ ...genuine, challenge: filled(1, 31) })))).toEqual({
      code: "challenge-length",
      bytes: 31,
    });
  });

  it("refuses strangers, forgeries, tampered payloads and non-SOCs; the genuine one still passes", () => {
    const admission = new Admission(explicit);
    const spam = signBroadcast(stranger, Kind.DATA, TOPIC, filled(1), 0n, utf8("spam")).broadcast;
    expect(hex((reason(admission.onBroadcast(spam)) as { owner: Uint8Array }).owner)).toBe(hex(stranger.address));
    const forged = genuine.soc.slice();
    forged[32 + 40]! ^= 0x01;
    expect(["invalid-soc", "not-admitted"]).toContain(reason(admission.onBroadcast(makeBroadcast({ ...genuine, soc: forged }))).code);
    const tampered = genuine.soc.slice();
    tampered[tampered.length - 1]! ^= 0x01;
    expect(["invalid-soc", "not-admitted"]).toContain(reason(admission.onBroadcast(makeBroadcast({ ...genuine, soc: tampered }))).code);
    expect(reason(admission.onBroadcast(makeBroadcast({ ...genuine, soc: new Uint8Array(50) })))).toMatchObject({
      code: "not-a-soc",
      fault: { code: "soc-too-short" },
    });
    expect(asData(admission.onBroadcast(genuine)).index).toBe(4n);
  });

  it("drops unknown kinds, AUTH and garbage", () => {
    const admission = new Admission(explicit);
    const claimer = outbox(explicit, admin);
    claimer.beginSession(filled(1));
    const auth = claimer.nextFrame()!.signed.broadcast;
    expect(auth.kind).toBe(Kind.AUTH);
    expect(reason(admission.onBroadcast(auth))).toEqual({ code: "auth-delivered" });
    for (const value of [0, 5, 99, -1]) {
      expect(reason(admission.onBroadcast(makeBroadcast({ ...auth, kind: value })))).toEqual({ code: "unknown-kind", value });
    }
    expect(reason(admission.onFrame(Uint8Array.of(0x0a, 0x05, 0x01))).code).toBe("malformed");
  });
});

describe("Admission per configuration (docs/PROTOCOL.md §6: jam, spectator-jam, live-stream, group-chat, implicit)", () => {
  const rosterFrame = (cohort: ReturnType<typeof spec>, publishers: Uint8Array[], index: bigint) =>
    signBroadcast(admin, Kind.ROSTER, cohort.topic, filled(7), index, encodeRoster(publishers)).broadcast;
  const dataFrom = (cohort: ReturnType<typeof spec>, signer: ReturnType<typeof key>, index: bigint) =>
    signBroadcast(signer, Kind.DATA, cohort.topic, filled(8), index, utf8("m")).broadcast;

  const configurations = {
    jam: spec(admin, TopicBinding.FEED_TOPIC, { closed: true }),
    "spectator-jam": spec(admin, TopicBinding.FEED_TOPIC),
    "live-stream": spec(admin, TopicBinding.FEED_TOPIC),
    "group-chat": spec(admin, TopicBinding.MNEMONIC, { all: true }),
  };

  for (const [name, cohort] of Object.entries(configurations)) {
    it(`${name}: admits ${name === "group-chat" ? "anyone" : name === "live-stream" ? "the admin only" : "the admin and the rostered"}`, () => {
      const admission = new Admission(cohort);
      if (name === "jam" || name === "spectator-jam") {
        expect(admission.onBroadcast(rosterFrame(cohort, [member.address], 0n)).type).toBe("roster");
      }
      const verdicts = [admin, member, stranger].map((signer) => admission.onBroadcast(dataFrom(cohort, signer, 0n)).type);
      const expected =
        name === "group-chat"
          ? ["data", "data", "data"]
          : name === "live-stream"
            ? ["data", "dropped", "dropped"]
            : ["data", "data", "dropped"];
      expect(verdicts).toEqual(expected);
    });
  }

  it("group-chat: an implicit-style chunk is not a session-feed chunk", () => {
    const admission = new Admission(configurations["group-chat"]);
    const implicit = signImplicit(member, feedId(TOPIC, 0n), undefined, utf8("x")).broadcast;
    expect(reason(admission.onBroadcast(implicit))).toEqual({ code: "challenge-length", bytes: 0 });
  });

  it("implicit: the binding's shape decides", () => {
    const signer = key(3);
    const other = key(4);
    for (const binding of [TopicBinding.MNEMONIC, TopicBinding.FEED_TOPIC] as const) {
      const cohort = spec(undefined, binding);
      const admission = new Admission(cohort);
      for (const who of [signer, other]) {
        const writer = outbox(cohort, who);
        writer.enqueue(data(utf8("hi"), 0n));
        const frame = delivered(writer, filled(0))[0]!;
        expect(hex(asData(admission.onBroadcast(frame)).owner)).toBe(hex(who.address));
        expect(reason(admission.onBroadcast(frame))).toMatchObject({ code: "duplicate" });
      }
    }
    const feed = new Admission(spec(undefined, TopicBinding.FEED_TOPIC));
    const wrong = signImplicit(signer, feedId(TOPIC, 3n), 4n, utf8("x")).broadcast;
    expect(reason(feed.onBroadcast(wrong))).toMatchObject({ code: "shape", fault: { code: "feed-id-mismatch" } });

    const ownerSpec = makeSpec({ topic: keccak256(signer.address), binding: TopicBinding.OWNER });
    const owner = new Admission(ownerSpec);
    const mic = outbox(ownerSpec, signer);
    mic.enqueue(data(utf8("mic"), 0n));
    const micFrame = delivered(mic, filled(0))[0]!;
    expect(asData(owner.onBroadcast(micFrame)).payload).toEqual(utf8("mic"));
    const impostor = signImplicit(other, micFrame.soc.slice(0, 32), undefined, utf8("mic")).broadcast;
    expect(reason(owner.onBroadcast(impostor))).toMatchObject({ code: "shape", fault: { code: "owner-not-topic" } });

    const anchorId = filled(0x77);
    const anchor = new Admission(makeSpec({ topic: socAddress(anchorId, signer.address), binding: TopicBinding.ANCHOR }));
    for (const payload of ["one", "two"]) {
      expect(asData(anchor.onBroadcast(signImplicit(signer, anchorId, undefined, utf8(payload)).broadcast)).payload).toEqual(utf8(payload));
    }
    expect(reason(anchor.onBroadcast(signImplicit(other, anchorId, undefined, utf8("three")).broadcast))).toMatchObject({
      code: "shape",
      fault: { code: "address-not-topic" },
    });

    const topic = socIdTopicFor(signer.address);
    const socId = new Admission(makeSpec({ topic, binding: TopicBinding.SOC_ID }));
    expect(asData(socId.onBroadcast(signImplicit(signer, topic, undefined, utf8("moc")).broadcast)).payload).toEqual(utf8("moc"));
    expect(proximity(socAddress(topic, other.address), topic) < PO_MIN).toBe(true);
    expect(reason(socId.onBroadcast(signImplicit(other, topic, undefined, utf8("moc")).broadcast))).toMatchObject({
      code: "shape",
      fault: { code: "proximity-too-low" },
    });

    const noAdmin = new Admission(spec(undefined, TopicBinding.MNEMONIC));
    const roster = signBroadcast(signer, Kind.ROSTER, TOPIC, filled(1), 0n, new Uint8Array(0)).broadcast;
    expect(reason(noAdmin.onBroadcast(roster))).toEqual({ code: "service-without-admin", kind: Kind.ROSTER });
    const broken = signSoc(signer, feedId(TOPIC, 0n), utf8("x"));
    broken[32 + 64] = 0;
    const bad = makeBroadcast({ soc: broken, kind: Kind.DATA, challenge: new Uint8Array(0), index: 0n });
    expect(reason(noAdmin.onBroadcast(bad))).toMatchObject({ code: "invalid-soc", fault: { code: "soc-signature" } });
  });
});

describe("roster handling", () => {
  it("grant and revoke change admission; the admin is always admitted", () => {
    const admission = new Admission(explicit);
    const before = signBroadcast(member, Kind.DATA, TOPIC, filled(7), 0n, utf8("before")).broadcast;
    expect(reason(admission.onBroadcast(before)).code).toBe("not-admitted");
    expect(admission.admits(member.address)).toBe(false);
    const grant = signBroadcast(admin, Kind.ROSTER, TOPIC, filled(1), 0n, encodeRoster([member.address])).broadcast;
    expect(admission.onBroadcast(grant)).toMatchObject({ type: "roster", index: 0n });
    expect(admission.admits(member.address)).toBe(true);
    expect(asData(admission.onBroadcast(before)).payload).toEqual(utf8("before"));
    const revoke = signBroadcast(admin, Kind.ROSTER, TOPIC, filled(3), 1n, encodeRoster([])).broadcast;
    expect(admission.onBroadcast(revoke)).toMatchObject({ type: "roster", index: 1n });
    const after = signBroadcast(member, Kind.DATA, TOPIC, filled(2), 1n, utf8("after")).broadcast;
    expect(reason(admission.onBroadcast(after))).toMatchObject({ code: "not-admitted" });
    expect(asData(admission.onBroadcast(signBroadcast(admin, Kind.DATA, TOPIC, filled(3), 0n, utf8("own")).broadcast)).index).toBe(0n);
  });

  it("takes ROSTER and EOS only from the admin's feed, and checks their form", () => {
    const admission = new Admission(explicit);
    admission.onBroadcast(signBroadcast(admin, Kind.ROSTER, TOPIC, filled(1), 0n, encodeRoster([member.address])).broadcast);
    const memberRoster = signBroadcast(member, Kind.ROSTER, TOPIC, filled(2), 1n, encodeRoster([member.address, filled(8, 20)])).broadcast;
    expect(reason(admission.onBroadcast(memberRoster))).toMatchObject({ code: "invalid-soc", fault: { code: "address-mismatch" } });
    const memberEos = signBroadcast(member, Kind.EOS, TOPIC, filled(2), 0n, new Uint8Array(0)).broadcast;
    expect(reason(admission.onBroadcast(memberEos))).toMatchObject({ code: "invalid-soc", fault: { code: "address-mismatch" } });
    expect(admission.roster.map(toHex)).toEqual([hex(member.address)]);
    for (const [index, payload] of [
      [1n, ""],
      [0n, "x"],
    ] as const) {
      const malformed = signBroadcast(admin, Kind.EOS, TOPIC, filled(3), index, utf8(payload)).broadcast;
      expect(reason(admission.onBroadcast(malformed)).code).toBe("malformed-eos");
    }
    const garbage = signBroadcast(admin, Kind.ROSTER, TOPIC, filled(3), 1n, Uint8Array.of(0x0a, 0x02, 1, 2)).broadcast;
    expect(reason(admission.onBroadcast(garbage))).toMatchObject({ code: "invalid-roster", fault: { code: "roster-entry-length" } });
    expect(admission.rosterCursor, "an invalid roster moves no cursor").toBe(1n);
    expect(admission.onBroadcast(signBroadcast(admin, Kind.EOS, TOPIC, filled(3), 0n, new Uint8Array(0)).broadcast)).toEqual({
      type: "eos",
    });
  });

  it("reports a roster index gap as a liveness fault; the first roster may have any index", () => {
    const admission = new Admission(explicit);
    const roster = (index: bigint) =>
      signBroadcast(admin, Kind.ROSTER, TOPIC, filled(Number(index)), index, encodeRoster([filled(Number(index), 20)])).broadcast;
    expect(admission.onBroadcast(roster(5n))).not.toHaveProperty("gap");
    expect(admission.onBroadcast(roster(6n))).not.toHaveProperty("gap");
    expect(admission.onBroadcast(roster(9n))).toMatchObject({ type: "roster", gap: { expected: 7n, got: 9n } });
    expect(admission.roster.map(toHex), "the newer roster still applies").toEqual([hex(filled(9, 20))]);
    expect(reason(admission.onBroadcast(roster(8n)))).toEqual({ code: "retransmit", kind: Kind.ROSTER, index: 8n, cursor: 10n });
  });
});

describe("cursors", () => {
  it("drop retransmits, report DATA gaps per publisher, refuse index 2^64-1", () => {
    const admission = new Admission(explicit);
    const writer = outbox(explicit, admin);
    writer.enqueue(data(utf8("a"), 20n));
    writer.enqueue(data(utf8("b"), 21n));
    const first = delivered(writer, filled(1));
    const verdicts = first.map((frame) => asData(admission.onBroadcast(frame)));
    expect(verdicts.map((verdict) => verdict.gap)).toEqual([undefined, undefined]);
    expect(reason(admission.onBroadcast(first[1]!))).toEqual({ code: "retransmit", kind: Kind.DATA, index: 21n, cursor: 22n });
    const resigned = signBroadcast(admin, Kind.DATA, TOPIC, filled(2), 21n, utf8("b")).broadcast;
    expect(reason(admission.onBroadcast(resigned)).code).toBe("retransmit");
    writer.enqueue(data(utf8("c"), 22n));
    expect(asData(admission.onBroadcast(delivered(writer, filled(2))[0]!))).not.toHaveProperty("gap");
    const far = signBroadcast(admin, Kind.DATA, TOPIC, filled(2), 1000n, utf8("d")).broadcast;
    expect(asData(admission.onBroadcast(far)).gap).toEqual({ expected: 23n, got: 1000n });
    const max = signBroadcast(admin, Kind.DATA, TOPIC, filled(2), (1n << 64n) - 1n, utf8("e")).broadcast;
    expect(reason(admission.onBroadcast(max))).toEqual({ code: "index-max", kind: Kind.DATA });
  });

  it("are bounded: the least recently advanced is evicted, reported, and restarts", () => {
    const chat = spec(admin, TopicBinding.MNEMONIC, { all: true });
    const admission = new Admission(chat, { cursorsMax: 3 });
    const signers = [key(11), key(12), key(13), key(14)];
    const frame = (signer: ReturnType<typeof key>, index: bigint) =>
      signBroadcast(signer, Kind.DATA, TOPIC, filled(1), index, utf8("m")).broadcast;
    for (const signer of signers.slice(0, 3)) expect(asData(admission.onBroadcast(frame(signer, 5n)))).not.toHaveProperty("evicted");
    // key(11) advances again, so key(12) is now the least recently used.
    asData(admission.onBroadcast(frame(signers[0]!, 6n)));
    const fourth = asData(admission.onBroadcast(frame(signers[3]!, 0n)));
    expect(fourth.evicted).toEqual({ owner: signers[1]!.address, cursor: 6n });
    expect(admission.cursorCount).toBe(3);
    expect(
      asData(admission.onBroadcast(frame(signers[1]!, 1n))).gap,
      "an evicted publisher restarts: no gap, no retransmit",
    ).toBeUndefined();
    expect(reason(admission.onBroadcast(frame(signers[3]!, 0n))).code).toBe("retransmit");
  });

  it("survive a new Admission through snapshot and restore", () => {
    const admission = new Admission(explicit);
    const grant = signBroadcast(admin, Kind.ROSTER, TOPIC, filled(1), 3n, encodeRoster([member.address])).broadcast;
    admission.onBroadcast(grant);
    const memberFrame = signBroadcast(member, Kind.DATA, TOPIC, filled(1), 40n, utf8("m")).broadcast;
    asData(admission.onBroadcast(memberFrame));
    const stored = JSON.parse(JSON.stringify(admission.snapshot())) as unknown;
    const later = new Admission(explicit);
    expect(later.restore(stored)).toEqual({ ok: true, value: undefined });
    expect(later.admits(member.address)).toBe(true);
    expect(reason(later.onBroadcast(memberFrame)).code).toBe("retransmit");
    expect(reason(later.onBroadcast(grant)).code).toBe("retransmit");
    const next = signBroadcast(member, Kind.DATA, TOPIC, filled(2), 42n, utf8("n")).broadcast;
    expect(asData(later.onBroadcast(next)).gap).toEqual({ expected: 41n, got: 42n });
    const untouched = new Admission(explicit);
    for (const bad of [
      null,
      { version: 2 },
      { ...(stored as object), rosterCursor: "-1" },
      { ...(stored as object), cursors: [["zz", "1"]] },
    ]) {
      expect(untouched.restore(bad)).toMatchObject({ ok: false, fault: { code: "snapshot-invalid" } });
    }
    expect(untouched.rosterCursor).toBe(0n);
  });

  it("implicit dedup window is bounded", () => {
    const cohort = spec(undefined, TopicBinding.MNEMONIC);
    const admission = new Admission(cohort, { dedupWindowChunks: 8 });
    const signer = key(3);
    const first = signImplicit(signer, feedId(TOPIC, 0n), undefined, utf8("x")).broadcast;
    asData(admission.onBroadcast(first));
    expect(reason(admission.onBroadcast(first)).code).toBe("duplicate");
    for (let index = 1n; index <= 8n; index++)
      asData(admission.onBroadcast(signImplicit(signer, feedId(TOPIC, index), undefined, utf8("")).broadcast));
    expect(asData(admission.onBroadcast(first)).payload, "fell out of the window: accepted again (R28's accepted risk)").toEqual(utf8("x"));
  });
});

describe("implicit FEED_TOPIC cursors", () => {
  const feed = spec(undefined, TopicBinding.FEED_TOPIC);
  const update = (writer: ReturnType<typeof key>, index: bigint) =>
    signImplicit(writer, feedId(TOPIC, index), index, utf8("update")).broadcast;

  it("report gaps per owner, two writers interleaved; other implicit bindings have none", () => {
    const admission = new Admission(feed);
    const [first, second] = [key(3), key(4)];
    const deliveries: Array<[ReturnType<typeof key>, bigint, { expected: bigint; got: bigint } | undefined]> = [
      [first, 0n, undefined],
      [second, 10n, undefined],
      [first, 1n, undefined],
      [second, 12n, { expected: 11n, got: 12n }],
      [first, 4n, { expected: 2n, got: 4n }],
      [second, 13n, undefined],
      [first, 5n, undefined],
      [second, 20n, { expected: 14n, got: 20n }],
    ];
    for (const [writer, index, gap] of deliveries) {
      const verdict = asData(admission.onBroadcast(update(writer, index)));
      expect([hex(verdict.owner), verdict.index, verdict.gap, verdict.evicted], `index ${index}`).toEqual([
        hex(writer.address),
        index,
        gap,
        undefined,
      ]);
    }
    expect([admission.cursor(first.address), admission.cursor(second.address), admission.cursorCount]).toEqual([6n, 21n, 2]);
    const mnemonic = new Admission(spec(undefined, TopicBinding.MNEMONIC));
    for (const index of [0n, 5n, 9n]) {
      const verdict = asData(mnemonic.onBroadcast(update(first, index)));
      expect([verdict.gap, verdict.evicted], `index ${index}`).toEqual([undefined, undefined]);
    }
    expect(mnemonic.cursorCount).toBe(0);
  });

  it("deliver a lower index without a gap and keep the cursor; measure gaps from the highest index seen", () => {
    const admission = new Admission(feed);
    const writer = key(3);
    for (const index of [5n, 6n]) asData(admission.onBroadcast(update(writer, index)));
    const late = asData(admission.onBroadcast(update(writer, 2n)));
    expect([late.index, late.gap, late.next?.index]).toEqual([2n, undefined, 3n]);
    expect(admission.cursor(writer.address), "not moved back").toBe(7n);
    expect(reason(admission.onBroadcast(update(writer, 2n))).code, "the R28 window dedups").toBe("duplicate");
    expect(asData(admission.onBroadcast(update(writer, 9n))).gap).toEqual({ expected: 7n, got: 9n });
    const MAX = (1n << 64n) - 1n;
    expect(asData(admission.onBroadcast(update(writer, MAX - 1n))).gap).toEqual({ expected: 10n, got: MAX - 1n });
    for (const index of [MAX, 3n]) expect(asData(admission.onBroadcast(update(writer, index))).gap, `index ${index}`).toBeUndefined();
    expect(admission.cursor(writer.address)).toBe(MAX);
    const restored = new Admission(feed);
    expect(restored.restore(JSON.parse(JSON.stringify(admission.snapshot())) as unknown), "a cursor at 2^64-1 is a uint64").toEqual({
      ok: true,
      value: undefined,
    });
    expect(restored.cursor(writer.address)).toBe(MAX);
  });

  it("are bounded: an evicted writer is reported and restarts without a gap", () => {
    const admission = new Admission(feed, { cursorsMax: 1 });
    const [first, second] = [key(3), key(4)];
    expect(asData(admission.onBroadcast(update(first, 0n)))).not.toHaveProperty("evicted");
    const newcomer = asData(admission.onBroadcast(update(second, 4n)));
    expect([newcomer.gap, newcomer.evicted]).toEqual([undefined, { owner: first.address, cursor: 1n }]);
    const back = asData(admission.onBroadcast(update(first, 9n)));
    expect(back.gap, "first frame after the eviction").toBeUndefined();
    expect(back.evicted).toEqual({ owner: second.address, cursor: 5n });
    expect(asData(admission.onBroadcast(update(first, 11n))).gap, "held again").toEqual({ expected: 10n, got: 11n });
  });
});

describe("next update", () => {
  const MAX = (1n << 64n) - 1n;
  /** A verdict's next update with its address as hex, or undefined. */
  const nextOf = (verdict: Verdict) =>
    verdict.type === "data" || verdict.type === "roster"
      ? verdict.next && { index: verdict.next.index, address: toHex(verdict.next.address) }
      : undefined;
  /** Where a written frame is, in the shape of `nextOf`. */
  const whereItIs = (outgoing: Outgoing) => ({ index: outgoing.index, address: toHex(outgoing.address) });
  /** keccak256(keccak256(keccak256(prefix ‖ topic ‖ challenge) ‖ be64(index)) ‖ owner), docs/PROTOCOL.md §1.1. */
  const sessionFeedAddress = (prefix: Uint8Array, challenge: Uint8Array, index: bigint, owner: Uint8Array) =>
    toHex(keccak256(keccak256(keccak256(prefix, TOPIC, challenge), be64(index)), owner));

  it("on session feeds is where the publisher signs its next DATA and its next ROSTER, each on its own feed", () => {
    const admission = new Admission(explicit);
    const writer = outbox(explicit, admin);
    writer.enqueue(data(utf8("a"), 7n));
    writer.enqueue({ kind: Kind.ROSTER, index: 2n, payload: encodeRoster([]) });
    writer.enqueue(data(utf8("b"), 8n));
    writer.enqueue({ kind: Kind.ROSTER, index: 3n, payload: encodeRoster([member.address]) });
    writer.enqueue(data(utf8("c"), 9n));
    writer.beginSession(filled(4));
    const frames = written(writer).filter((outgoing) => outgoing.kind !== Kind.AUTH);
    const verdicts = frames.map((outgoing) => admission.onBroadcast(outgoing.signed.broadcast));
    expect(verdicts.map((verdict) => verdict.type)).toEqual(["data", "roster", "data", "roster", "data"]);
    expect(nextOf(verdicts[0]!), "DATA 7 → DATA 8").toEqual(whereItIs(frames[2]!));
    expect(nextOf(verdicts[1]!), "ROSTER 2 → ROSTER 3").toEqual(whereItIs(frames[3]!));
    expect(nextOf(verdicts[2]!), "DATA 8 → DATA 9").toEqual(whereItIs(frames[4]!));
    // The formula of docs/PROTOCOL.md §1.1, independent of the library's chunk-id code.
    expect(nextOf(verdicts[4]!)).toEqual({ index: 10n, address: sessionFeedAddress(new Uint8Array(0), filled(4), 10n, admin.address) });
    const rosterPrefix = Uint8Array.of(...utf8("bps-service:v1"), Kind.ROSTER);
    expect(nextOf(verdicts[3]!)).toEqual({ index: 4n, address: sessionFeedAddress(rosterPrefix, filled(4), 4n, admin.address) });
  });

  it("follows the frame's own challenge: a publisher that reconnects signs its next update elsewhere", () => {
    const admission = new Admission(explicit);
    const writer = outbox(explicit, admin);
    writer.enqueue(data(utf8("a"), 0n));
    writer.beginSession(filled(1));
    const before = admission.onBroadcast(written(writer).at(-1)!.signed.broadcast);
    writer.enqueue(data(utf8("b"), 1n));
    writer.beginSession(filled(2));
    const after = written(writer).at(-1)!;
    expect(nextOf(before)!.index).toBe(after.index);
    expect(nextOf(before)!.address, "predicted on the old stream").not.toBe(toHex(after.address));
    expect(asData(admission.onBroadcast(after.signed.broadcast)).gap, "consecutive: no gap").toBeUndefined();
  });

  it("under ALL is on the member's own session feed", () => {
    const chat = spec(admin, TopicBinding.MNEMONIC, { all: true });
    const admission = new Admission(chat);
    const writer = outbox(chat, member);
    writer.enqueue(data(utf8("a"), 50n));
    writer.enqueue(data(utf8("b"), 51n));
    writer.beginSession(filled(6));
    const frames = written(writer);
    expect(
      frames.map((frame) => frame.kind),
      "no claim under ALL",
    ).toEqual([Kind.DATA, Kind.DATA]);
    expect(nextOf(admission.onBroadcast(frames[0]!.signed.broadcast))).toEqual(whereItIs(frames[1]!));
    expect(nextOf(admission.onBroadcast(frames[1]!.signed.broadcast))).toEqual({
      index: 52n,
      address: sessionFeedAddress(new Uint8Array(0), filled(6), 52n, member.address),
    });
  });

  it("under implicit FEED_TOPIC is the next feed update; other implicit bindings have none", () => {
    const cohort = spec(undefined, TopicBinding.FEED_TOPIC);
    const admission = new Admission(cohort);
    const writer = outbox(cohort, member);
    writer.enqueue(data(utf8("a"), 30n));
    writer.enqueue(data(utf8("b"), 31n));
    writer.beginSession(filled(0));
    const frames = written(writer);
    const first = admission.onBroadcast(frames[0]!.signed.broadcast);
    expect(nextOf(first)).toEqual(whereItIs(frames[1]!));
    expect(nextOf(first)).toEqual({ index: 31n, address: toHex(keccak256(keccak256(TOPIC, be64(31n)), member.address)) });
    const mnemonic = new Admission(spec(undefined, TopicBinding.MNEMONIC));
    expect(asData(mnemonic.onBroadcast(signImplicit(member, feedId(TOPIC, 0n), undefined, utf8("x")).broadcast))).not.toHaveProperty(
      "next",
    );
    const gsocId = filled(7);
    const anchor = new Admission(makeSpec({ topic: socAddress(gsocId, member.address), binding: TopicBinding.ANCHOR }));
    expect(asData(anchor.onBroadcast(signImplicit(member, gsocId, undefined, utf8("y")).broadcast))).not.toHaveProperty("next");
  });

  it("stops before 2^64-1, which no publisher may use (D13), and EOS has none", () => {
    const admission = new Admission(explicit);
    const frame = (kind: Kind.DATA | Kind.ROSTER, index: bigint) =>
      signBroadcast(admin, kind, TOPIC, filled(3), index, kind === Kind.ROSTER ? encodeRoster([]) : utf8("m")).broadcast;
    expect(nextOf(admission.onBroadcast(frame(Kind.DATA, MAX - 2n)))?.index).toBe(MAX - 1n);
    expect(asData(admission.onBroadcast(frame(Kind.DATA, MAX - 1n)))).not.toHaveProperty("next");
    expect(nextOf(admission.onBroadcast(frame(Kind.ROSTER, MAX - 2n)))?.index).toBe(MAX - 1n);
    const last = admission.onBroadcast(frame(Kind.ROSTER, MAX - 1n));
    expect(last.type).toBe("roster");
    expect(last).not.toHaveProperty("next");
    expect(admission.onBroadcast(signBroadcast(admin, Kind.EOS, TOPIC, filled(3), 0n, new Uint8Array(0)).broadcast)).toEqual({
      type: "eos",
    });
    const feed = new Admission(spec(undefined, TopicBinding.FEED_TOPIC));
    expect(nextOf(feed.onBroadcast(signImplicit(member, feedId(TOPIC, MAX - 2n), MAX - 2n, utf8("u")).broadcast))?.index).toBe(MAX - 1n);
    expect(asData(feed.onBroadcast(signImplicit(member, feedId(TOPIC, MAX - 1n), MAX - 1n, utf8("v")).broadcast))).not.toHaveProperty(
      "next",
    );
  });

  it("after a gap is the update after the one that arrived; a first frame is never a gap", () => {
    const admission = new Admission(explicit);
    const frame = (index: bigint) => signBroadcast(admin, Kind.DATA, TOPIC, filled(5), index, utf8("m")).broadcast;
    const first = asData(admission.onBroadcast(frame(1000n)));
    expect(first.gap, "a publisher's first frame, at any index").toBeUndefined();
    expect(first.next?.index).toBe(1001n);
    const skipped = asData(admission.onBroadcast(frame(1005n)));
    expect(skipped.gap).toEqual({ expected: 1001n, got: 1005n });
    expect(nextOf(skipped)).toEqual({ index: 1006n, address: sessionFeedAddress(new Uint8Array(0), filled(5), 1006n, admin.address) });
  });
});
