/**
 * Client-side signing of whole publications: the SOC, the `Broadcast` carrying it, and that
 * message encoded once as a frame (docs/PROTOCOL.md §1, R41).
 *
 * Owns: `SignedFrame`, `signBroadcast` (session-feed ids, explicit and ALL cohorts, every
 * kind) and `signImplicit` (the binding's own id, no challenge, index only where given).
 *
 * Never: decides ids for a binding (callers pass the id for implicit cohorts), keeps
 * indices or roles (`outbox.ts`), or talks to the network.
 */

import { type KnownKind, sessionChunkId } from "./chunkId.js";
import { Kind } from "./gen/bps_pb.js";
import type { SigningKey } from "./signer.js";
import { signSoc } from "./soc.js";
import { type Broadcast, broadcastFrame, makeBroadcast } from "./wire.js";

/** A signed publication: chunk, `Broadcast`, and its frame (what goes on the stream). */
export interface SignedFrame {
  readonly chunk: Uint8Array;
  readonly broadcast: Broadcast;
  readonly frame: Uint8Array;
}

function signed(chunk: Uint8Array, kind: KnownKind, challenge: Uint8Array, index: bigint): SignedFrame {
  const broadcast = makeBroadcast({ soc: chunk, kind, challenge, index });
  return { chunk, broadcast, frame: broadcastFrame(broadcast) };
}

/**
 * A `Broadcast` of `kind` at `index` on the session feed of (`topic`, `challenge`): the
 * chunk id is `sessionChunkId(kind, topic, challenge, index)` and the span is the payload
 * length (so AUTH and EOS, with no payload, get span 0). Throws `PayloadError`.
 */
export function signBroadcast(
  key: SigningKey,
  kind: KnownKind,
  topic: Uint8Array,
  challenge: Uint8Array,
  index: bigint,
  payload: Uint8Array,
): SignedFrame {
  const chunk = signSoc(key, sessionChunkId(kind, topic, challenge, index), payload);
  return signed(chunk, kind, challenge.slice(), index);
}

/**
 * A DATA `Broadcast` for an implicit cohort (R11): the chunk carries the binding's own `id`,
 * the challenge is empty, and the index is set only when given (implicit FEED_TOPIC, D4;
 * proto3 cannot tell 0 from unset on the wire). Throws `PayloadError`.
 */
export function signImplicit(key: SigningKey, id: Uint8Array, index: bigint | undefined, payload: Uint8Array): SignedFrame {
  return signed(signSoc(key, id, payload), Kind.DATA, new Uint8Array(0), index ?? 0n);
}
