import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";

import {
  CohortSpecSchema,
  JoinSchema,
  PublisherRegime,
  type RejectReason,
  SpecError,
  TopicBinding,
  authorship,
  cohortKey,
  decodeJoin,
  describeReject,
  encodeJoin,
  fromHex,
  joinFor,
  makeSpec,
  toHex,
  validateJoin,
} from "../src/index.js";
import { thrownBy } from "./fixtures.js";

const TOPIC = new Uint8Array(32).fill(0x11);
const ADMIN = new Uint8Array(20).fill(0xaa);
const ADDR = new Uint8Array(20).fill(0xbb);
const topicHex = "11".repeat(32);
const adminHex = "aa".repeat(20);

/** An explicit MNEMONIC Join that passes every rule; each case breaks exactly one. */
function goodJoin(
  change: (cohort: {
    topic: Uint8Array;
    binding: number;
    admin: Uint8Array;
    publishers: number;
    history: boolean;
    closed: boolean;
  }) => void = () => undefined,
  addr: Uint8Array = ADDR,
) {
  const cohort = { topic: TOPIC, binding: TopicBinding.MNEMONIC as number, admin: ADMIN, publishers: 0, history: false, closed: false };
  change(cohort);
  return create(JoinSchema, {
    cohort: create(CohortSpecSchema, {
      ...cohort,
      binding: cohort.binding as TopicBinding,
      publishers: cohort.publishers as PublisherRegime,
    }),
    addr,
  });
}

function rejected(join: ReturnType<typeof goodJoin>): RejectReason {
  const result = validateJoin(join);
  if (result.ok) throw new Error("the Join was accepted");
  return result.fault;
}

describe("validateJoin (R3, D6, D7), as proto/src/spec.rs", () => {
  it("accepts the base Join and types it", () => {
    const valid = validateJoin(goodJoin());
    if (!valid.ok) throw new Error(valid.fault.code);
    expect(valid.value.spec.binding).toBe(TopicBinding.MNEMONIC);
    expect(toHex(valid.value.spec.admin!)).toBe(adminHex);
    expect(authorship(valid.value.spec)).toBe("explicit");
    expect(toHex(valid.value.key)).toBe(`0a20${topicHex}1005` + `1a14${adminHex}`);
  });

  it("names one reason per rule", () => {
    const cases: Array<[ReturnType<typeof goodJoin>, RejectReason]> = [
      [create(JoinSchema, { addr: ADDR }), { code: "missing-cohort" }],
      [goodJoin((c) => (c.binding = 0)), { code: "binding-unspecified" }],
      [goodJoin((c) => (c.binding = 6)), { code: "binding-unknown", value: 6 }],
      [goodJoin((c) => (c.binding = -1)), { code: "binding-unknown", value: -1 }],
      [goodJoin((c) => (c.publishers = 2)), { code: "publishers-unknown", value: 2 }],
      [goodJoin((c) => (c.topic = new Uint8Array(31))), { code: "topic-length", bytes: 31 }],
      [goodJoin((c) => (c.topic = new Uint8Array(0))), { code: "topic-length", bytes: 0 }],
      [goodJoin((c) => (c.admin = new Uint8Array(19))), { code: "admin-length", bytes: 19 }],
      [goodJoin((c) => (c.admin = new Uint8Array(32))), { code: "admin-length", bytes: 32 }],
      [goodJoin(() => undefined, new Uint8Array(0)), { code: "addr-length", bytes: 0 }],
      [goodJoin(() => undefined, new Uint8Array(21)), { code: "addr-length", bytes: 21 }],
      [goodJoin((c) => ((c.publishers = 1), (c.closed = true))), { code: "closed-with-all" }],
      [goodJoin((c) => ((c.admin = new Uint8Array(0)), (c.closed = true))), { code: "closed-implicit" }],
      [goodJoin((c) => ((c.admin = new Uint8Array(0)), (c.publishers = 1))), { code: "all-without-admin" }],
      [
        goodJoin((c) => ((c.binding = TopicBinding.FEED_TOPIC), (c.publishers = 1))),
        { code: "all-without-mnemonic", binding: TopicBinding.FEED_TOPIC },
      ],
    ];
    for (const [join, reason] of cases) expect(rejected(join)).toEqual(reason);
  });

  it("reports the first broken rule in the Rust order", () => {
    // Unknown binding and a short topic and a missing addr: the binding comes first.
    const join = goodJoin((c) => ((c.binding = 9), (c.topic = new Uint8Array(1))), new Uint8Array(0));
    expect(rejected(join)).toEqual({ code: "binding-unknown", value: 9 });
    const topicThenAddr = goodJoin((c) => (c.topic = new Uint8Array(1)), new Uint8Array(0));
    expect(rejected(topicThenAddr)).toEqual({ code: "topic-length", bytes: 1 });
  });

  it("describes each reason in the Rust words", () => {
    expect(describeReject({ code: "addr-length", bytes: 0 })).toBe("Join addr is missing (required, 20 bytes)");
    expect(describeReject({ code: "all-without-mnemonic", binding: TopicBinding.SOC_ID })).toBe(
      "publishers ALL requires binding MNEMONIC, not SOC_ID",
    );
  });

  it("accepts history (the broker's call, D11) and every authorship", () => {
    const history = validateJoin(goodJoin((c) => (c.history = true)));
    expect(history.ok && history.value.spec.history).toBe(true);
    const implicit = validateJoin(goodJoin((c) => ((c.admin = new Uint8Array(0)), (c.binding = TopicBinding.SOC_ID))));
    expect(implicit.ok && authorship(implicit.value.spec)).toBe("implicit");
    const all = validateJoin(goodJoin((c) => (c.publishers = 1)));
    expect(all.ok && authorship(all.value.spec)).toBe("all");
  });
});

describe("cohort key (R1)", () => {
  it("is the canonical encoding of the examples in proto/tests/golden.rs", () => {
    const cases: Array<[Parameters<typeof makeSpec>[0], string]> = [
      [{ topic: TOPIC, binding: TopicBinding.MNEMONIC }, `0a20${topicHex}1005`],
      [{ topic: TOPIC, binding: TopicBinding.MNEMONIC, admin: ADMIN }, `0a20${topicHex}10051a14${adminHex}`],
      [{ topic: TOPIC, binding: TopicBinding.MNEMONIC, admin: ADMIN, all: true }, `0a20${topicHex}10051a14${adminHex}2001`],
      [{ topic: TOPIC, binding: TopicBinding.MNEMONIC, history: true }, `0a20${topicHex}10052801`],
      [{ topic: TOPIC, binding: TopicBinding.MNEMONIC, admin: ADMIN, closed: true }, `0a20${topicHex}10051a14${adminHex}3001`],
      [
        { topic: TOPIC, binding: TopicBinding.MNEMONIC, admin: ADMIN, all: true, history: true },
        `0a20${topicHex}10051a14${adminHex}20012801`,
      ],
      [{ topic: TOPIC, binding: TopicBinding.ANCHOR }, `0a20${topicHex}1001`],
      [{ topic: TOPIC, binding: TopicBinding.SOC_ID }, `0a20${topicHex}1002`],
      [{ topic: TOPIC, binding: TopicBinding.OWNER }, `0a20${topicHex}1003`],
      [{ topic: TOPIC, binding: TopicBinding.FEED_TOPIC }, `0a20${topicHex}1004`],
    ];
    for (const [init, expected] of cases) expect(toHex(cohortKey(makeSpec(init)))).toBe(expected);
  });

  it("ignores unknown fields and explicitly encoded defaults", () => {
    // Fields out of order, every default written out, unknown fields 15 and 16 (as golden.rs).
    const cohort = fromHex(`100 51a00 2000 7801 0a20${topicHex} 2800 8201 02ffff 3000`.replace(/\s+/g, ""));
    const body = Uint8Array.of(0x0a, cohort.length, ...cohort, ...fromHex(`1a02ffff1214${"bb".repeat(20)}`));
    const decoded = decodeJoin(body);
    if (!decoded.ok) throw new Error("decode");
    const noisy = validateJoin(decoded.value);
    const clean = validateJoin(joinFor(makeSpec({ topic: TOPIC, binding: TopicBinding.MNEMONIC }), ADDR));
    expect(noisy.ok && toHex(noisy.value.key)).toBe(`0a20${topicHex}1005`);
    expect(clean.ok && toHex(clean.value.key)).toBe(`0a20${topicHex}1005`);
    expect(toHex(encodeJoin(joinFor(makeSpec({ topic: TOPIC, binding: TopicBinding.MNEMONIC }), ADDR)))).toBe(
      `0a24 0a20${topicHex}1005 1214${"bb".repeat(20)}`.replace(/\s+/g, ""),
    );
  });

  it("makeSpec refuses what the broker must reject", () => {
    expect(() => makeSpec({ topic: TOPIC, binding: TopicBinding.MNEMONIC, all: true })).toThrow(SpecError);
    expect(() => makeSpec({ topic: TOPIC, binding: TopicBinding.OWNER, closed: true })).toThrow(SpecError);
    expect(() => makeSpec({ topic: TOPIC.subarray(1), binding: TopicBinding.OWNER })).toThrow(SpecError);
    expect(thrownBy(() => makeSpec({ topic: TOPIC, binding: TopicBinding.OWNER, admin: ADMIN.subarray(1) }))).toMatchObject({
      fault: { code: "admin-length", bytes: 19 },
    });
    const spec = makeSpec({ topic: TOPIC, binding: TopicBinding.OWNER });
    expect(Object.isFrozen(spec)).toBe(true);
  });
});
