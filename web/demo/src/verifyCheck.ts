/**
 * What the verification worker does with one message, as a plain function (the worker in
 * `verifyWorker.ts` only binds it to its messages, so tests run it without a browser): a
 * message that waited longer than `VERIFY_WAIT_MS_MAX` is answered "late" without any
 * work; otherwise, if it is a `Broadcast` frame, its chunk is checked as the library's
 * `validateSoc` checks it (the signature recovery and the BMT hash, the costly part of
 * verifying a delivery) and the chunk comes back with the answer.
 *
 * Owns: `VerifyRequest`, `VerifyAnswer`, `checkMessage` and the time budget. Never: keeps
 * state across messages (the cohort's cursors and roster stay with the page's `Admission`,
 * which uses the answer for exactly these bytes, `checkedChunks.ts`).
 */

import { decodeBroadcast, decodeFrameMessage, validateSoc } from "../../src/index.js";
import type { ChunkCheck } from "./checkedChunks.js";
import { VERIFY_MESSAGE_BYTES_MAX } from "./verifyQueue.js";

/**
 * Longest a message may wait for its check: beyond it the worker is far behind (a flood),
 * and checking stale messages would only keep it behind; generous, so a busy machine
 * drops nothing a person sends.
 */
export const VERIFY_WAIT_MS_MAX = 10_000;

/** From the page to the worker. */
export interface VerifyRequest {
  readonly seq: number;
  readonly message: Uint8Array;
  /** `Date.now()` on the page when the message arrived (one clock for both threads). */
  readonly arrivedAtMs: number;
}

/** From the worker to the page. */
export type VerifyAnswer =
  | { readonly seq: number; readonly type: "checked"; readonly chunk: Uint8Array; readonly check: ChunkCheck }
  /** Not a Broadcast frame (the Ack, or bytes the library will refuse): nothing costly to check. */
  | { readonly seq: number; readonly type: "no-chunk" }
  | { readonly seq: number; readonly type: "late"; readonly waitedMs: number };

/** The worker's answer to `request` at `nowMs` (module docs). */
export function checkMessage(request: VerifyRequest, nowMs: number): VerifyAnswer {
  const { seq, message } = request;
  const waitedMs = nowMs - request.arrivedAtMs;
  if (waitedMs > VERIFY_WAIT_MS_MAX) return { seq, type: "late", waitedMs };
  const body = decodeFrameMessage(message, VERIFY_MESSAGE_BYTES_MAX);
  const broadcast = body.ok ? decodeBroadcast(body.value) : undefined;
  if (broadcast?.ok !== true) return { seq, type: "no-chunk" };
  const chunk = broadcast.value.soc;
  return { seq, type: "checked", chunk, check: validateSoc(chunk) };
}
