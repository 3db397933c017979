// The demo page's verification budget without a browser: the ordered, bounded queue and
// its drop counters, the worker's per-message check and time budget, the answers handed to
// the library only for the exact bytes the worker checked, and `Admission` using them.

import { describe, expect, it } from "vitest";

import { Admission, Kind, Status, TopicBinding, ackFrame, makeAck, signBroadcast, utf8, validateSoc } from "../src/index.js";
import { CHECKED_CHUNKS_MAX, CheckedChunks } from "../demo/src/checkedChunks.js";
import { VERIFY_WAIT_MS_MAX, checkMessage } from "../demo/src/verifyCheck.js";
import { VERIFY_MESSAGE_BYTES_MAX, VERIFY_PENDING_BYTES_MAX, VERIFY_PENDING_MAX, VerifyQueue } from "../demo/src/verifyQueue.js";
import { TOPIC, filled, key, spec } from "./fixtures.js";

const admin = key(1);
const stranger = key(9);
const challenge = filled(0x33);
const cohort = spec(admin, TopicBinding.FEED_TOPIC);

function frameOf(index: bigint, text: string, signer = admin): Uint8Array {
  return signBroadcast(signer, Kind.DATA, TOPIC, challenge, index, utf8(text)).frame;
}

function message(bytes: number, fill = 1): Uint8Array {
  return new Uint8Array(bytes).fill(fill);
}

describe("VerifyQueue", () => {
  it("releases messages in arrival order, whatever order the worker answers in", () => {
    const queue = new VerifyQueue<string>();
    const sent = [0, 1, 2].map((n) => queue.offer(message(10, n), "link"));
    const [first, second, third] = sent.map((entry) => {
      if (typeof entry !== "object") throw new Error("expected a check");
      return entry;
    });
    queue.settle(third!.seq, { type: "deliver" });
    queue.settle(second!.seq, { type: "deliver" });
    expect(queue.takeReady()).toEqual([]);
    expect(queue.counts.pending).toBe(3);
    queue.settle(first!.seq, { type: "deliver" });
    expect(queue.takeReady().map((entry) => entry.message[0])).toEqual([0, 1, 2]);
    expect(queue.counts).toMatchObject({ delivered: 3, pending: 0, pendingBytes: 0, droppedFull: 0, droppedLate: 0 });
  });

  it("drops and counts what arrives while VERIFY_PENDING_MAX messages wait, and takes more once they left", () => {
    const queue = new VerifyQueue<string>();
    const accepted = [];
    for (let n = 0; n < VERIFY_PENDING_MAX + 40; n++) accepted.push(queue.offer(message(100), "link"));
    expect(accepted.filter((entry) => entry === "dropped")).toHaveLength(40);
    expect(queue.counts).toMatchObject({ droppedFull: 40, pending: VERIFY_PENDING_MAX, pendingBytes: 100 * VERIFY_PENDING_MAX });
    for (const entry of accepted) if (typeof entry === "object") queue.settle(entry.seq, { type: "deliver" });
    expect(queue.takeReady()).toHaveLength(VERIFY_PENDING_MAX);
    expect(queue.offer(message(100), "link")).toMatchObject({ target: "link" });
    expect(queue.counts).toMatchObject({ delivered: VERIFY_PENDING_MAX, droppedFull: 40, pending: 1 });
  });

  it("bounds the bytes waiting too", () => {
    const queue = new VerifyQueue<string>(1000, 10_000);
    expect(typeof queue.offer(message(6000), "link")).toBe("object");
    expect(queue.offer(message(6000), "link")).toBe("dropped");
    expect(typeof queue.offer(message(4000), "link")).toBe("object");
    expect(queue.counts).toMatchObject({ droppedFull: 1, pending: 2, pendingBytes: 10_000 });
    expect(VERIFY_PENDING_BYTES_MAX).toBeGreaterThanOrEqual((VERIFY_PENDING_MAX * VERIFY_MESSAGE_BYTES_MAX) / 4);
  });

  it("drops and counts what the worker answered late, and keeps the order of the rest", () => {
    const queue = new VerifyQueue<string>();
    const entries = [0, 1, 2].map((n) => queue.offer(message(10, n), "link")) as Array<{ seq: number }>;
    queue.settle(entries[0]!.seq, { type: "deliver" });
    queue.settle(entries[1]!.seq, { type: "late" });
    queue.settle(entries[2]!.seq, { type: "deliver" });
    expect(queue.takeReady().map((entry) => entry.message[0])).toEqual([0, 2]);
    expect(queue.counts).toMatchObject({ delivered: 2, droppedLate: 1, pending: 0 });
  });

  it("sends no over-long message to the worker: it passes in its turn, for the library to refuse", () => {
    const queue = new VerifyQueue<string>();
    const before = queue.offer(message(10, 7), "link") as { seq: number };
    expect(queue.offer(message(VERIFY_MESSAGE_BYTES_MAX + 1, 8), "link")).toBe("pass");
    expect(queue.takeReady()).toEqual([]);
    queue.settle(before.seq, { type: "deliver" });
    expect(queue.takeReady().map((entry) => entry.message[0])).toEqual([7, 8]);
  });

  it("forgets a closed link's messages and ignores the worker's answers for them", () => {
    const queue = new VerifyQueue<string>();
    const old = queue.offer(message(10, 1), "old") as { seq: number };
    const current = queue.offer(message(10, 2), "new") as { seq: number };
    expect(queue.holds("old")).toBe(true);
    queue.forget("old");
    expect(queue.holds("old")).toBe(false);
    queue.settle(old.seq, { type: "deliver" });
    queue.settle(current.seq, { type: "deliver" });
    expect(queue.takeReady().map((entry) => entry.target)).toEqual(["new"]);
    expect(queue.counts).toMatchObject({ delivered: 1, pending: 0, pendingBytes: 0 });
  });
});

describe("checkMessage, the worker's work", () => {
  it("checks a Broadcast's chunk as validateSoc does and returns the chunk", () => {
    const frame = frameOf(5n, "hello");
    const answer = checkMessage({ seq: 3, message: frame, arrivedAtMs: 1000 }, 1000);
    if (answer.type !== "checked") throw new Error(`expected a check, got ${answer.type}`);
    expect(answer.seq).toBe(3);
    expect(answer.check).toEqual(validateSoc(answer.chunk));
    expect(answer.check.ok && answer.check.value.owner).toEqual(admin.address);
  });

  it("finds a forged payload: the recovered owner is not the signer", () => {
    const frame = flipFirst(frameOf(6n, "hello"), "hello");
    const answer = checkMessage({ seq: 1, message: frame, arrivedAtMs: 0 }, 0);
    if (answer.type !== "checked") throw new Error(`expected a check, got ${answer.type}`);
    expect(answer.check.ok && answer.check.value.owner).not.toEqual(admin.address);
  });

  it("answers late, without any work, past VERIFY_WAIT_MS_MAX", () => {
    const frame = frameOf(7n, "stale");
    expect(checkMessage({ seq: 2, message: frame, arrivedAtMs: 0 }, VERIFY_WAIT_MS_MAX)).toMatchObject({ type: "checked" });
    expect(checkMessage({ seq: 2, message: frame, arrivedAtMs: 0 }, VERIFY_WAIT_MS_MAX + 1)).toEqual({
      seq: 2,
      type: "late",
      waitedMs: VERIFY_WAIT_MS_MAX + 1,
    });
  });

  it("has nothing to check in an Ack or in bytes that are no frame", () => {
    expect(checkMessage({ seq: 0, message: ackFrame(makeAck(Status.OK, challenge)), arrivedAtMs: 0 }, 0).type).toMatch(
      /^(no-chunk|checked)$/,
    );
    expect(checkMessage({ seq: 0, message: message(20, 0xff), arrivedAtMs: 0 }, 0)).toEqual({ seq: 0, type: "no-chunk" });
  });
});

describe("CheckedChunks", () => {
  const chunkOf = (frame: Uint8Array) => {
    const answer = checkMessage({ seq: 0, message: frame, arrivedAtMs: 0 }, 0);
    if (answer.type !== "checked") throw new Error("expected a check");
    return answer;
  };

  it("hands an answer over once, for the same bytes", () => {
    const checked = new CheckedChunks();
    const { chunk, check } = chunkOf(frameOf(1n, "one"));
    checked.remember(chunk, check);
    expect(checked.take(chunk.slice())).toBe(check);
    expect(checked.take(chunk)).toBeUndefined();
    expect(checked.size).toBe(0);
  });

  it("gives nothing for a chunk that shares the id and signature but not the payload", () => {
    const checked = new CheckedChunks();
    const { chunk, check } = chunkOf(frameOf(2n, "genuine"));
    checked.remember(chunk, check);
    const forged = flipFirst(chunk, "genuine");
    expect(checked.take(forged)).toBeUndefined();
    expect(checked.take(chunk)).toBe(check);
  });

  it("forgets the oldest answer at its bound", () => {
    const checked = new CheckedChunks(2);
    const answers = [1n, 2n, 3n].map((index) => chunkOf(frameOf(index, "x")));
    for (const { chunk, check } of answers) checked.remember(chunk, check);
    expect(checked.size).toBe(2);
    expect(checked.take(answers[0]!.chunk)).toBeUndefined();
    expect(checked.take(answers[2]!.chunk)).toBe(answers[2]!.check);
    expect(CHECKED_CHUNKS_MAX).toBeGreaterThan(VERIFY_PENDING_MAX);
  });
});

describe("Admission with the worker's answers (AdmissionOptions.validateSoc)", () => {
  it("admits with the given answer and does no check of its own", () => {
    const checked = new CheckedChunks();
    const asked: Uint8Array[] = [];
    const admission = new Admission(cohort, {
      validateSoc: (chunk) => {
        asked.push(chunk);
        const check = checked.take(chunk);
        if (check === undefined) throw new Error("the library checked a chunk the worker did not");
        return check;
      },
    });
    const frames = [frameOf(10n, "first"), frameOf(11n, "second", stranger)];
    const verdicts = frames.map((frame) => {
      const answer = checkMessage({ seq: 0, message: frame, arrivedAtMs: 0 }, 0);
      if (answer.type !== "checked") throw new Error("expected a check");
      checked.remember(answer.chunk, answer.check);
      return admission.onFrame(frame.subarray(varintBytes(frame)));
    });
    expect(asked).toHaveLength(2);
    expect(verdicts.map((verdict) => verdict.type)).toEqual(["data", "dropped"]);
    expect(verdicts[1]).toMatchObject({ reason: { code: "not-admitted", owner: stranger.address } });
  });

  it("drops a delivery the worker found invalid, as invalid-soc", () => {
    const frame = frameOf(12n, "checked elsewhere");
    const admission = new Admission(cohort, {
      validateSoc: () => ({ ok: false, fault: { code: "soc-too-short", length: 0, min: 0 } }),
    });
    expect(admission.onFrame(frame.subarray(varintBytes(frame)))).toMatchObject({ type: "dropped", reason: { code: "invalid-soc" } });
  });
});

/** A copy of `bytes` with the first byte of `text` (found in it) flipped: a one-letter forgery. */
function flipFirst(bytes: Uint8Array, text: string): Uint8Array {
  const needle = utf8(text);
  const at = Buffer.from(bytes).indexOf(Buffer.from(needle));
  if (at < 0) throw new Error(`"${text}" is not in the bytes`);
  const copy = bytes.slice();
  copy[at] = copy[at]! ^ 0x01;
  return copy;
}

/** Bytes of a frame's varint length prefix. */
function varintBytes(frame: Uint8Array): number {
  let at = 0;
  while ((frame[at]! & 0x80) !== 0) at++;
  return at + 1;
}
