// The demo page's verifier glue without a browser: a fake Worker that runs the worker's
// own `checkMessage` when the test says so. Messages reach the library in order and only
// once the worker answered, a link's end comes after the messages before it, a flood past
// the queue's bound is dropped and counted, and `Admission` uses the worker's answers.

import { describe, expect, it } from "vitest";

import {
  Admission,
  FRAME_BYTES_MAX_DEFAULT,
  Kind,
  type LinkHandlers,
  type Transport,
  TopicBinding,
  decodeFrameMessage,
  signBroadcast,
  utf8,
} from "../src/index.js";
import { type VerifierCounts, WorkerVerifier, type WorkerLike } from "../demo/src/verifier.js";
import { type VerifyRequest, checkMessage } from "../demo/src/verifyCheck.js";
import { VERIFY_PENDING_MAX } from "../demo/src/verifyQueue.js";
import { TOPIC, filled, key, spec } from "./fixtures.js";

const admin = key(1);
const challenge = filled(0x33);
const cohort = spec(admin, TopicBinding.FEED_TOPIC);

/** A Worker that answers only when told to, with the real worker's function. */
class FakeWorker implements WorkerLike {
  readonly inbox: VerifyRequest[] = [];
  readonly #listeners: Array<(event: Event) => void> = [];

  postMessage(request: VerifyRequest): void {
    this.inbox.push(request);
  }

  addEventListener(type: string, listener: (event: Event) => void): void {
    if (type === "message") this.#listeners.push(listener);
  }

  /** Answers every request so far, in order. */
  answerAll(): void {
    for (const request of this.inbox.splice(0)) {
      const answer = checkMessage(request, request.arrivedAtMs);
      for (const listener of this.#listeners) listener({ data: answer } as unknown as Event);
    }
  }
}

/** A transport whose far end the test drives. */
function farEnd(): { transport: Transport; far: () => LinkHandlers; closedByPage: () => boolean } {
  let handlers: LinkHandlers | undefined;
  let closed = false;
  return {
    transport: {
      open: async (given) => {
        handlers = given;
        return { send: () => undefined, close: () => (closed = true), bufferedBytes: 0 };
      },
    },
    far: () => handlers!,
    closedByPage: () => closed,
  };
}

function frameOf(index: bigint, text: string): Uint8Array {
  return signBroadcast(admin, Kind.DATA, TOPIC, challenge, index, utf8(text)).frame;
}

function setUp() {
  const worker = new FakeWorker();
  let counts: VerifierCounts | undefined;
  const verifier = new WorkerVerifier(
    (latest) => (counts = latest),
    () => undefined,
    worker,
  );
  const end = farEnd();
  const got: Array<Uint8Array | string> = [];
  return { worker, verifier, end, got, counts: () => counts! };
}

describe("WorkerVerifier", () => {
  it("gives the library each message in order once the worker answered, and the link's end after them", async () => {
    const { worker, verifier, end, got } = setUp();
    await verifier.transport(end.transport).open({ message: (data) => got.push(data), closed: (fault) => got.push(fault.code) });
    const frames = [frameOf(1n, "one"), frameOf(2n, "two")];
    for (const frame of frames) end.far().message(frame);
    end.far().closed({ code: "closed-by-peer", closeCode: 1000, reason: "" });
    expect(got).toEqual([]);
    worker.answerAll();
    expect(got).toEqual([...frames, "closed-by-peer"]);
    expect(verifier.counts).toMatchObject({ checkedInWorker: 2, delivered: 2, pending: 0 });
  });

  it("tells a link's end at once when nothing of it waits", async () => {
    const { verifier, end, got } = setUp();
    await verifier.transport(end.transport).open({ message: (data) => got.push(data), closed: (fault) => got.push(fault.code) });
    end.far().closed({ code: "link-error", detail: "gone" });
    expect(got).toEqual(["link-error"]);
  });

  it("drops and counts a flood past the queue's bound, and delivers what it held", async () => {
    const { worker, verifier, end, got, counts } = setUp();
    await verifier.transport(end.transport).open({ message: (data) => got.push(data), closed: () => undefined });
    const frame = frameOf(3n, "flood");
    for (let copy = 0; copy < VERIFY_PENDING_MAX + 50; copy++) end.far().message(frame);
    expect(worker.inbox).toHaveLength(VERIFY_PENDING_MAX);
    expect(counts()).toMatchObject({ droppedFull: 50, pending: VERIFY_PENDING_MAX });
    worker.answerAll();
    expect(got).toHaveLength(VERIFY_PENDING_MAX);
    expect(counts()).toMatchObject({ droppedFull: 50, pending: 0, checkedInWorker: VERIFY_PENDING_MAX });
  });

  it("gives nothing more to a link the library closed", async () => {
    const { worker, verifier, end, got } = setUp();
    const link = await verifier.transport(end.transport).open({ message: (data) => got.push(data), closed: () => got.push("closed") });
    end.far().message(frameOf(4n, "late"));
    link.close();
    worker.answerAll();
    expect(got).toEqual([]);
    expect(end.closedByPage()).toBe(true);
    expect(verifier.counts.pending).toBe(0);
  });

  it("lets Admission verify with the worker's answers, and counts a chunk checked on the page apart", async () => {
    const { worker, verifier, end } = setUp();
    const admission = new Admission(cohort, verifier.admission);
    const verdicts: string[] = [];
    await verifier.transport(end.transport).open({
      message: (data) => {
        const body = decodeFrameMessage(data, FRAME_BYTES_MAX_DEFAULT);
        verdicts.push(body.ok ? admission.onFrame(body.value).type : "not a frame");
      },
      closed: () => undefined,
    });
    const frame = frameOf(5n, "checked in the worker");
    end.far().message(frame);
    worker.answerAll();
    expect(verdicts).toEqual(["data"]);
    expect(verifier.counts).toMatchObject({ checkedInWorker: 1, checkedOnPage: 0 });
    const own = signBroadcast(admin, Kind.DATA, TOPIC, challenge, 6n, utf8("signed here")).broadcast;
    expect(admission.onBroadcast(own).type).toBe("data");
    expect(verifier.counts.checkedOnPage).toBe(1);
  });
});
