/**
 * Chunk ids of the session feeds (docs/PROTOCOL.md §1.1), feed ids and
 * SOC addresses.
 *
 * Owns: the id every receiver derives from a frame's kind, the cohort topic, the stream's
 * challenge and the frame's index; the `SERVICE_PREFIX` that separates the service feeds
 * (AUTH, ROSTER, EOS) from DATA; `feedId`; `socAddress`; `knownKind`.
 *
 * Never: signatures or SOC parsing (`soc.ts`), or a decision about which kinds a stream may
 * send (the broker's and the publisher's).
 */

import { be64, utf8 } from "./bytes.js";
import { Kind } from "./gen/bps_pb.js";
import { keccak256 } from "./hash.js";

/** Prefixes the session topic of every non-DATA kind, followed by the kind as one byte (D2). */
export const SERVICE_PREFIX: Uint8Array = utf8("bps-service:v1");

const SERVICE_KINDS = [Kind.AUTH, Kind.ROSTER, Kind.EOS] as const;
// D2 puts the kind in one byte: every kind that takes the service prefix must fit.
if (SERVICE_KINDS.some((kind) => Number(kind) > 0xff)) throw new Error("a service kind exceeds one byte");

/** The kinds a frame may carry: `KIND_UNSPECIFIED` and values outside the enum are not. */
export type KnownKind = Kind.DATA | Kind.AUTH | Kind.ROSTER | Kind.EOS;

/** `value` as a known kind, or `undefined` (R14: such frames are dropped). */
export function knownKind(value: number): KnownKind | undefined {
  // Any number may arrive; the cases below keep the ones the enum names.
  const kind = value as Kind;
  switch (kind) {
    case Kind.DATA:
    case Kind.AUTH:
    case Kind.ROSTER:
    case Kind.EOS:
      return kind;
    default:
      return undefined;
  }
}

/**
 * `keccak256(prefix ‖ topic ‖ challenge)`, the prefix empty for DATA and
 * `SERVICE_PREFIX ‖ kind` for every other kind, so each kind is its own feed.
 */
export function sessionTopic(kind: KnownKind, topic: Uint8Array, challenge: Uint8Array): Uint8Array {
  if (kind === Kind.DATA) return keccak256(topic, challenge);
  return keccak256(SERVICE_PREFIX, Uint8Array.of(kind), topic, challenge);
}

/** A feed update's id, as bee's `pkg/feeds`: `keccak256(topic ‖ be64(index))` (also D4). */
export function feedId(topic: Uint8Array, index: bigint): Uint8Array {
  return keccak256(topic, be64(index));
}

/** The chunk id of a frame: the feed id of `index` in the kind's session feed. */
export function sessionChunkId(kind: KnownKind, topic: Uint8Array, challenge: Uint8Array, index: bigint): Uint8Array {
  return feedId(sessionTopic(kind, topic, challenge), index);
}

/** A single-owner chunk's address: `keccak256(id ‖ owner)`. */
export function socAddress(id: Uint8Array, owner: Uint8Array): Uint8Array {
  return keccak256(id, owner);
}
