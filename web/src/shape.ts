/**
 * Binding shapes under implicit authorship and Swarm proximity order (docs/PROTOCOL.md §4,
 * R11, D4, D8; bee `pkg/swarm/proximity.go`).
 *
 * Owns: `PO_MIN`, `MAX_PO`, `proximity` and `checkImplicit`, which decides whether an
 * already valid SOC fits a cohort's binding and what its dedup key is (R28):
 *
 * | binding | the SOC must satisfy | dedup key |
 * |---|---|---|
 * | MNEMONIC | any owner | SOC address |
 * | ANCHOR (GSOC) | keccak256(id ‖ owner) == topic | wrapped CAC address |
 * | OWNER (MIC) | keccak256(owner) == topic, PO(address, topic) >= 16 | SOC address |
 * | FEED_TOPIC | id == keccak256(topic ‖ be64(index)) (D4), any owner | SOC address |
 * | SOC_ID (MOC) | id == topic, PO(address, topic) >= 16 (D8: anchor = topic) | SOC address |
 *
 * Never: verifies signatures (the caller passes a `Recovered` from `validateSoc`), applies
 * to explicit authorship or ALL (there PO does not apply, R12), or keeps a dedup window.
 */

import { toHex, equalBytes } from "./bytes.js";
import { feedId } from "./chunkId.js";
import { type Result, fail, ok } from "./errors.js";
import { TopicBinding } from "./gen/bps_pb.js";
import { keccak256 } from "./hash.js";
import type { Recovered } from "./soc.js";
import { type Binding, bindingName } from "./spec.js";

/** Minimum proximity order between SOC address and topic for OWNER and SOC_ID. */
export const PO_MIN = 16;
/** bee's cap on proximity order (`swarm.MaxPO`): only the first 4 bytes are compared. */
export const MAX_PO = 31;
/** Bytes bee compares: MaxPO / 8 + 1. */
const PO_BYTES = Math.floor(MAX_PO / 8) + 1;

/**
 * bee's `swarm.Proximity`: leading equal bits of `one` and `other`, MSB first, over at most
 * their first 4 bytes (and the shorter one's length); `MAX_PO` if no bit differs there.
 */
export function proximity(one: Uint8Array, other: Uint8Array): number {
  const bytes = Math.min(one.length, other.length, PO_BYTES);
  for (let position = 0; position < bytes; position++) {
    const differing = one[position]! ^ other[position]!;
    if (differing !== 0) return position * 8 + Math.clz32(differing) - 24;
  }
  return MAX_PO;
}

/** Why a valid SOC does not fit the cohort's binding. */
export type ShapeFault =
  | { readonly code: "address-not-topic"; readonly address: Uint8Array; readonly topic: Uint8Array }
  | { readonly code: "owner-not-topic"; readonly owner: Uint8Array; readonly topic: Uint8Array }
  | {
      readonly code: "proximity-too-low";
      readonly binding: Binding;
      readonly po: number;
      readonly min: number;
      readonly address: Uint8Array;
      readonly topic: Uint8Array;
    }
  | { readonly code: "feed-id-mismatch"; readonly id: Uint8Array; readonly expected: Uint8Array; readonly index: bigint }
  | { readonly code: "id-not-topic"; readonly id: Uint8Array; readonly topic: Uint8Array };

/** Text for a shape fault. */
export function describeShapeFault(fault: ShapeFault): string {
  switch (fault.code) {
    case "address-not-topic":
      return `ANCHOR: SOC address ${toHex(fault.address)} is not the topic ${toHex(fault.topic)}`;
    case "owner-not-topic":
      return `OWNER: keccak256 of owner 0x${toHex(fault.owner)} is not the topic ${toHex(fault.topic)}`;
    case "proximity-too-low":
      return `${bindingName(fault.binding)}: SOC address ${toHex(fault.address)} has proximity ${fault.po} to the topic ${toHex(fault.topic)}, below ${fault.min}`;
    case "feed-id-mismatch":
      return `FEED_TOPIC: id ${toHex(fault.id)} is not the feed id ${toHex(fault.expected)} of index ${fault.index}`;
    case "id-not-topic":
      return `SOC_ID: id ${toHex(fault.id)} is not the topic ${toHex(fault.topic)}`;
  }
}

function checkProximity(binding: Binding, topic: Uint8Array, soc: Recovered): ShapeFault | undefined {
  const po = proximity(soc.address, topic);
  if (po >= PO_MIN) return undefined;
  return { code: "proximity-too-low", binding, po, min: PO_MIN, address: soc.address, topic };
}

/**
 * Whether `soc` (valid, owner recovered) fits `binding` at `topic` under implicit
 * authorship (R11). `index` is the frame's; only FEED_TOPIC reads it (D4). Returns the
 * dedup key (R28).
 */
export function checkImplicit(binding: Binding, topic: Uint8Array, index: bigint, soc: Recovered): Result<Uint8Array, ShapeFault> {
  switch (binding) {
    case TopicBinding.MNEMONIC:
      return ok(soc.address);
    case TopicBinding.ANCHOR:
      if (!equalBytes(soc.address, topic)) return fail({ code: "address-not-topic", address: soc.address, topic });
      // Many payloads share one GSOC address; the wrapped chunk tells them apart.
      return ok(soc.cacAddress);
    case TopicBinding.OWNER: {
      if (!equalBytes(keccak256(soc.owner), topic)) return fail({ code: "owner-not-topic", owner: soc.owner, topic });
      const far = checkProximity(binding, topic, soc);
      return far === undefined ? ok(soc.address) : fail(far);
    }
    case TopicBinding.FEED_TOPIC: {
      const expected = feedId(topic, index);
      if (!equalBytes(soc.id, expected)) return fail({ code: "feed-id-mismatch", id: soc.id, expected, index });
      return ok(soc.address);
    }
    case TopicBinding.SOC_ID: {
      if (!equalBytes(soc.id, topic)) return fail({ code: "id-not-topic", id: soc.id, topic });
      const far = checkProximity(binding, topic, soc);
      return far === undefined ? ok(soc.address) : fail(far);
    }
  }
}
