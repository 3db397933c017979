/**
 * How a verdict of the library's `Admission` reaches the page: a verified DATA becomes a
 * message with its recovered author, a roster or the end of stream a note, and a dropped
 * frame a failure mark with the reason, never a message.
 *
 * Owns: `showVerdict` and `describeDrop`. Retransmits and duplicates are not shown: they
 * passed verification and were already delivered once (a reconnect re-sends the roster in
 * force, R22), so they are neither news nor a failure.
 *
 * Never: verifies anything itself.
 */

import {
  type DropReason,
  Kind,
  type Verdict,
  describeDecodeFault,
  describeRosterFault,
  describeShapeFault,
  describeSocFault,
  toHex,
} from "../../src/index.js";
import { type Feed, addressText } from "./feed.js";

/** Writes one verdict into `feed` (module docs). */
export function showVerdict(feed: Feed, verdict: Verdict): void {
  switch (verdict.type) {
    case "data":
      feed.message(verdict.owner, verdict.index, verdict.payload);
      if (verdict.gap !== undefined) {
        feed.note(`gap from ${addressText(verdict.owner)}: expected #${verdict.gap.expected}, got #${verdict.gap.got}`);
      }
      return;
    case "roster":
      feed.note(`roster #${verdict.index}: ${verdict.publishers.map(addressText).join(", ") || "nobody"}`);
      if (verdict.gap !== undefined) feed.note(`roster gap: expected #${verdict.gap.expected}, got #${verdict.gap.got}`);
      return;
    case "eos":
      feed.note("the admin ended the stream");
      return;
    case "dropped":
      if (verdict.reason.code === "retransmit" || verdict.reason.code === "duplicate") return;
      feed.failure(verdict.reason.code, describeDrop(verdict.reason));
      return;
  }
}

/** One line for a dropped frame. */
export function describeDrop(reason: DropReason): string {
  switch (reason.code) {
    case "malformed":
      return `malformed frame (${describeDecodeFault(reason.fault)})`;
    case "unknown-kind":
      return `unknown kind ${reason.value}`;
    case "auth-delivered":
      return "an AUTH chunk was delivered (brokers never deliver one)";
    case "service-without-admin":
      return `${Kind[reason.kind]} in a cohort without admin`;
    case "challenge-length":
      return `challenge of ${reason.bytes} bytes`;
    case "not-a-soc":
      return `not a single-owner chunk (${describeSocFault(reason.fault)})`;
    case "id-mismatch":
      return `chunk id 0x${toHex(reason.actual)} is not the derived 0x${toHex(reason.expected)}`;
    case "invalid-soc":
      return `invalid chunk (${describeSocFault(reason.fault)})`;
    case "shape":
      return `wrong shape for the binding (${describeShapeFault(reason.fault)})`;
    case "not-admitted":
      return `signed by ${addressText(reason.owner)}, who may not publish here`;
    case "retransmit":
      return `${Kind[reason.kind]} #${reason.index} again (cursor #${reason.cursor})`;
    case "duplicate":
      return "a chunk already delivered";
    case "index-max":
      return `${Kind[reason.kind]} at index 2^64-1`;
    case "invalid-roster":
      return `undecodable roster (${describeRosterFault(reason.fault)})`;
    case "malformed-eos":
      return `malformed end of stream (index ${reason.index}, span ${reason.span}, ${reason.payloadLength} payload bytes)`;
  }
}
