/**
 * Cross-implementation agreement with the Rust `bps` CLI (bench/src/bin/bps.rs): the same
 * chunks, addresses and frames from the same inputs, and each side validates what the
 * other signs. Build the CLI with `cargo build --bin bps` in the repository root; the tests
 * use $BPS_BIN or ../target/debug/bps and fail, saying so, when it is missing.
 */

import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { create } from "@bufbuild/protobuf";
import { beforeAll, describe, expect, it } from "vitest";

import {
  CHUNK_SIZE,
  CohortSpecSchema,
  JoinSchema,
  Kind,
  PublisherRegime,
  SigningKey,
  Status,
  TopicBinding,
  ackFrame,
  cacAddress,
  cohortKey,
  describeReject,
  encodeFrame,
  encodeJoin,
  encodeRoster,
  feedId,
  fromHex,
  joinFor,
  joinFrame,
  keccak256,
  le64,
  makeAck,
  makeSpec,
  sessionChunkId,
  signBroadcast,
  signImplicit,
  signSoc,
  socAddress,
  toHex,
  validateJoin,
  validateSocAt,
} from "../src/index.js";
import { filled, pattern } from "./fixtures.js";

const here = dirname(fileURLToPath(import.meta.url));
const BPS_BIN = process.env["BPS_BIN"] ?? resolve(here, "../../target/debug/bps");

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function bps(...args: string[]): Run {
  const result = spawnSync(BPS_BIN, args, { encoding: "utf8" });
  if (result.error !== undefined) throw result.error;
  return { code: result.status, stdout: result.stdout.trim(), stderr: result.stderr.trim() };
}

function json(run: Run): Record<string, unknown> {
  expect(run.stderr, run.stderr).toBe("");
  return JSON.parse(run.stdout) as Record<string, unknown>;
}

/** A JSON integer field as an exact bigint (JSON.parse would round values above 2^53). */
function exactInteger(text: string, field: string): bigint {
  const match = new RegExp(`"${field}":(\\d+)`).exec(text);
  if (match === null) throw new Error(`no integer field ${field} in ${text}`);
  return BigInt(match[1]!);
}

beforeAll(() => {
  if (!existsSync(BPS_BIN)) {
    throw new Error(`the Rust bps CLI is not at ${BPS_BIN}: run \`cargo build --bin bps\` in the repository root or set BPS_BIN`);
  }
});

const keys = [1, 2, 0x5a, 0xfe].map((byte) => SigningKey.fromSecret(new Uint8Array(32).fill(byte)));
const topic = filled(0x42);
const challenge = filled(0x17);

describe("keys and CAC addresses", () => {
  it("bps key address agrees with SigningKey.address", () => {
    for (const signer of keys) expect(bps("key", "address", "--key", toHex(signer.exportSecret())).stdout).toBe(toHex(signer.address));
  });

  it("bps cac address agrees with cacAddress for many lengths and spans", () => {
    const data = pattern(CHUNK_SIZE, 11);
    for (const length of [0, 1, 31, 32, 33, 64, 100, 1000, 2048, 4095, 4096]) {
      const payload = data.subarray(0, length);
      expect(bps("cac", "address", toHex(payload)).stdout, `length ${length}`).toBe(toHex(cacAddress(le64(BigInt(length)), payload)));
    }
    expect(bps("cac", "address", "--span", "4096", "666f6f").stdout).toBe(toHex(cacAddress(le64(4096n), fromHex("666f6f"))));
  });
});

describe("SOCs signed by one side validate on the other", () => {
  it("JS-signed session-feed and implicit chunks pass bps soc inspect --address, with the same fields", () => {
    const signer = keys[2]!;
    const chunks: Uint8Array[] = [];
    for (const kind of [Kind.DATA, Kind.AUTH, Kind.ROSTER, Kind.EOS] as const) {
      const payload = kind === Kind.ROSTER ? encodeRoster([keys[0]!.address]) : kind === Kind.DATA ? pattern(700) : new Uint8Array(0);
      chunks.push(signBroadcast(signer, kind, topic, challenge, 123456789n, payload).chunk);
    }
    chunks.push(signImplicit(signer, feedId(topic, 9n), 9n, pattern(CHUNK_SIZE)).chunk);
    chunks.push(signSoc(signer, keccak256(topic), new Uint8Array(0)));
    for (const chunk of chunks) {
      const id = chunk.subarray(0, 32);
      const at = socAddress(id, signer.address);
      const run = bps("soc", "inspect", "--address", toHex(at), toHex(chunk));
      expect(run.code).toBe(0);
      const report = json(run);
      expect(report).toMatchObject({
        id: toHex(id),
        owner: toHex(signer.address),
        address: toHex(at),
        valid: true,
        payload_len: chunk.length - 105,
        wrapped_address: toHex(cacAddress(chunk.subarray(97, 105), chunk.subarray(105))),
      });
    }
  });

  it("a tampered or misaddressed chunk is invalid on both sides", () => {
    const signer = keys[1]!;
    const id = sessionChunkId(Kind.DATA, topic, challenge, 0n);
    const chunk = signSoc(signer, id, pattern(64));
    const at = socAddress(id, signer.address);
    const tampered = chunk.slice();
    tampered[tampered.length - 1]! ^= 1;
    const elsewhere = socAddress(id, keys[0]!.address);
    for (const [bytes, address] of [
      [tampered, at],
      [chunk, elsewhere],
    ] as const) {
      expect(bps("soc", "inspect", "--address", toHex(address), toHex(bytes)).code).toBe(1);
      expect(validateSocAt(bytes, address).ok).toBe(false);
    }
    const badV = chunk.slice();
    badV[96] = 26;
    const run = bps("soc", "inspect", "--address", toHex(at), toHex(badV));
    expect(run.code).toBe(1);
    expect(json(run)["error"]).toBe("SOC signature: signature v = 26 is outside 27..=34");
  });

  it("bps soc sign chunks validate in JS and are byte-identical to signSoc (RFC 6979 on both sides)", () => {
    const cases: Array<[SigningKey, Uint8Array, Uint8Array, bigint | undefined]> = [
      [keys[0]!, new Uint8Array(32), fromHex("666f6f"), undefined],
      [keys[1]!, sessionChunkId(Kind.ROSTER, topic, challenge, 5n), encodeRoster([keys[2]!.address]), undefined],
      [keys[2]!, sessionChunkId(Kind.AUTH, topic, challenge, 0n), new Uint8Array(0), undefined],
      [keys[3]!, feedId(topic, 1n << 40n), pattern(CHUNK_SIZE, 5), undefined],
      [keys[3]!, feedId(topic, 7n), pattern(10), 4096n],
    ];
    for (const [signer, id, payload, span] of cases) {
      const args = ["soc", "sign", "--key", toHex(signer.exportSecret()), "--id", toHex(id), "--payload", toHex(payload)];
      if (span !== undefined) args.push("--span", span.toString());
      const rust = fromHex(bps(...args).stdout);
      const valid = validateSocAt(rust, socAddress(id, signer.address));
      expect(valid.ok && toHex(valid.value.owner)).toBe(toHex(signer.address));
      expect(toHex(signSoc(signer, id, payload, span))).toBe(toHex(rust));
    }
  });
});

describe("frames encoded in JS decode in Rust to the same fields", () => {
  const admin = keys[0]!.address;
  const addr = keys[1]!.address;

  it("Join frames: every field and the cohort key (R1) agree", () => {
    const specs = [
      makeSpec({ topic, binding: TopicBinding.FEED_TOPIC, admin }),
      makeSpec({ topic, binding: TopicBinding.MNEMONIC, admin, all: true, history: true }),
      makeSpec({ topic, binding: TopicBinding.FEED_TOPIC, admin, closed: true }),
      makeSpec({ topic, binding: TopicBinding.SOC_ID }),
      makeSpec({ topic, binding: TopicBinding.ANCHOR, history: true }),
      makeSpec({ topic, binding: TopicBinding.OWNER }),
    ];
    for (const cohort of specs) {
      const report = json(bps("frame", "decode", toHex(joinFrame(joinFor(cohort, addr)))));
      expect(report).toEqual({
        type: "Join",
        addr: toHex(addr),
        cohort: {
          topic: toHex(topic),
          binding: TopicBinding[cohort.binding],
          admin: cohort.admin === undefined ? null : toHex(cohort.admin),
          publishers: cohort.all ? "ALL" : "PUBLISHER_REGIME_UNSPECIFIED",
          history: cohort.history,
          closed: cohort.closed,
        },
        cohort_key: toHex(cohortKey(cohort)),
        valid: true,
      });
    }
  });

  it("invalid Joins: Rust names the same reason, in the same words", () => {
    const join = (cohort: Parameters<typeof create<typeof CohortSpecSchema>>[1] | undefined, joinAddr: Uint8Array = addr) =>
      create(JoinSchema, { ...(cohort === undefined ? {} : { cohort: create(CohortSpecSchema, cohort) }), addr: joinAddr });
    const cases = [
      join({ topic, binding: 6 as TopicBinding, admin }),
      join({ topic, binding: TopicBinding.MNEMONIC, admin, publishers: 2 as PublisherRegime }),
      join({ topic: topic.subarray(1), binding: TopicBinding.MNEMONIC }),
      join({ topic, binding: TopicBinding.MNEMONIC, admin: admin.subarray(2) }),
      join({ topic, binding: TopicBinding.MNEMONIC, admin }, addr.subarray(1)),
      join({ topic, binding: TopicBinding.MNEMONIC, admin }, new Uint8Array(0)),
      join({ topic, binding: TopicBinding.MNEMONIC, admin, publishers: 1, closed: true }),
      join({ topic, binding: TopicBinding.MNEMONIC, closed: true }),
      join({ topic, binding: TopicBinding.MNEMONIC, publishers: 1 }),
      join({ topic, binding: TopicBinding.SOC_ID, admin, publishers: 1 }),
    ];
    for (const candidate of cases) {
      const verdict = validateJoin(candidate);
      if (verdict.ok) throw new Error("expected a rejection");
      const report = json(bps("frame", "decode", toHex(encodeFrame(encodeJoin(candidate)))));
      expect(report).toMatchObject({ type: "Join", valid: false, error: describeReject(verdict.fault) });
    }
  });

  it("Broadcast frames of every kind: soc, kind, challenge, exact index, recovered owner, roster", () => {
    const signer = keys[3]!;
    const members = [keys[0]!.address, keys[1]!.address];
    const frames = [
      signBroadcast(signer, Kind.DATA, topic, challenge, 0n, pattern(33)),
      signBroadcast(signer, Kind.AUTH, topic, challenge, 0n, new Uint8Array(0)),
      signBroadcast(signer, Kind.ROSTER, topic, challenge, (1n << 64n) - 2n, encodeRoster(members)),
      signBroadcast(signer, Kind.EOS, topic, challenge, 0n, new Uint8Array(0)),
      signImplicit(signer, feedId(topic, 12345678901234567n), 12345678901234567n, pattern(4096)),
      signImplicit(signer, topic, undefined, pattern(3)),
    ];
    for (const frame of frames) {
      const run = bps("frame", "decode", toHex(frame.frame));
      const report = json(run);
      expect(report).toMatchObject({
        type: "Broadcast",
        kind: Kind[frame.broadcast.kind],
        kind_value: frame.broadcast.kind,
        challenge: toHex(frame.broadcast.challenge),
        soc: toHex(frame.chunk),
        chunk: { owner: toHex(signer.address), id: toHex(frame.chunk.subarray(0, 32)), valid: true },
      });
      expect(exactInteger(run.stdout, "index")).toBe(frame.broadcast.index);
      if (frame.broadcast.kind === Kind.ROSTER) expect(report["roster"]).toEqual(members.map(toHex));
    }
  });

  it("Ack frames", () => {
    expect(json(bps("frame", "decode", toHex(ackFrame(makeAck(Status.OK, challenge)))))).toEqual({
      type: "Ack",
      status: "OK",
      challenge: toHex(challenge),
    });
    for (const status of [Status.FULL, Status.REJECTED]) {
      expect(json(bps("frame", "decode", toHex(ackFrame(makeAck(status)))))).toMatchObject({ type: "Ack", status: Status[status] });
    }
  });
});
