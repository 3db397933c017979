/**
 * The publishing side of one identity in one cohort, without I/O: roles, the claim, the
 * queue and signing (R7, R10, R11, R19–R24, R41, D3, D4), as the Rust
 * `bps_bench::publisher::Publisher` does it.
 *
 * Owns: `Outbox`. Per stream (`beginSession`) it knows its role: under explicit authorship
 * the admin's stream is pending and claims at once with an empty AUTH at index 0 under its
 * own challenge (D3: any valid frame claims, but AUTH at 0 is what every variant accepts);
 * a non-admin stream sends nothing until a verified roster naming it arrives (`onRoster`,
 * R23), then claims the same way, and stops when a later roster drops it (R24). Under ALL
 * and implicit authorship the stream publishes from the Join, with no claim (R10, R11).
 *
 * Publications arrive with their index already reserved (`IndexSequences`); a publication
 * queued or being written when a stream ends is signed again under the next stream's
 * challenge with the same kind, index and payload, so a copy the broker already accepted
 * becomes a harmless retransmit. Every chunk is signed when it is about to be written,
 * under the current challenge. Implicit authorship has no challenge: the chunk carries the
 * binding's own id (R11): FEED_TOPIC feedId(topic, index) with the frame's index set (D4),
 * MNEMONIC feedId(topic, index) with the index unset, ANCHOR the caller's GSOC id, SOC_ID
 * the topic, OWNER an id mined so that the chunk address is within PO 16 of the topic.
 *
 * Never: reads a socket, a clock or a store, verifies what it receives (the caller hands
 * verified rosters in), or grows without bound (`queuedPublicationsMax`).
 */

import { U64_MAX, equalBytes, toHex } from "./bytes.js";
import { type KnownKind, feedId, socAddress } from "./chunkId.js";
import { BpsError } from "./errors.js";
import { Kind, TopicBinding } from "./gen/bps_pb.js";
import { keccak256 } from "./hash.js";
import { PO_MIN, proximity } from "./shape.js";
import { type SignedFrame, signBroadcast, signImplicit } from "./signed.js";
import type { SigningKey } from "./signer.js";
import { checkPayload } from "./soc.js";
import { type Spec, authorship, bindingName } from "./spec.js";

/**
 * Publications held while no stream takes them (a reconnect, a publisher awaiting its
 * roster): enough for a burst, small enough that a page never buffers megabytes.
 */
export const QUEUED_PUBLICATIONS_MAX_DEFAULT = 256;

/** What this stream may do now. */
export type Role =
  /** Must claim: the next frame is AUTH at index 0 (admin, or rostered after the roster). */
  | "pending"
  /** Explicit authorship, not the admin: nothing may be sent until a roster names us. */
  | "awaiting-roster"
  /** Publishes the queue. */
  | "publisher"
  /** A roster dropped us: nothing more may be sent (R24). */
  | "revoked";

/** Why a key cannot publish in a cohort at all (checked once, by the constructor). */
export type PublisherFault =
  | { readonly code: "owner-not-topic"; readonly address: Uint8Array }
  | { readonly code: "anchor-without-id" }
  | { readonly code: "anchor-mismatch"; readonly address: Uint8Array; readonly id: Uint8Array }
  | { readonly code: "soc-id-proximity"; readonly address: Uint8Array; readonly po: number };

/** A key that does not fit the cohort's implicit binding. */
export class PublisherError extends BpsError<PublisherFault> {}

/** Why one publication cannot be queued. */
export type PublishFault =
  | { readonly code: "not-admin" }
  | { readonly code: "no-admin" }
  | { readonly code: "queue-full"; readonly max: number }
  | { readonly code: "index-max"; readonly kind: Kind };

/** A publication that cannot be queued. */
export class PublishError extends BpsError<PublishFault> {}

/** Text for a publish fault. */
export function describePublishFault(fault: PublishFault): string {
  switch (fault.code) {
    case "not-admin":
      return "only the admin publishes ROSTER and EOS";
    case "no-admin":
      return "ROSTER and EOS need an admin (implicit authorship has none)";
    case "queue-full":
      return `${fault.max} publications are already waiting for a stream`;
    case "index-max":
      return `${Kind[fault.kind]} index 2^64-1 is not allowed`;
  }
}

/** One queued publication: its kind, its reserved index and its payload. */
export interface Publication {
  readonly kind: Kind.DATA | Kind.ROSTER | Kind.EOS;
  readonly index: bigint;
  readonly payload: Uint8Array;
}

/** A signed frame ready for the stream, with what a caller reports about it. */
export interface Outgoing {
  readonly kind: Kind;
  /** The frame's index as sent; `undefined` when unset (implicit, except FEED_TOPIC). */
  readonly index: bigint | undefined;
  readonly id: Uint8Array;
  /** The SOC address keccak256(id ‖ owner). */
  readonly address: Uint8Array;
  readonly payloadLength: number;
  readonly signed: SignedFrame;
}

/** Options of an `Outbox`. */
export interface OutboxOptions {
  /** Implicit ANCHOR only: the chunk id, with keccak256(id ‖ address) = topic. */
  readonly anchorId?: Uint8Array;
  /** Publications held at most (default `QUEUED_PUBLICATIONS_MAX_DEFAULT`). */
  readonly queuedPublicationsMax?: number;
}

interface Stream {
  readonly challenge: Uint8Array;
  role: Role;
  inFlight: "claim" | "head" | undefined;
}

/** What gets signed: a publication, or the claim (AUTH). */
interface Signable {
  readonly kind: KnownKind;
  readonly index: bigint;
  readonly payload: Uint8Array;
}

const CLAIM: Signable = { kind: Kind.AUTH, index: 0n, payload: new Uint8Array(0) };

/** One identity publishing in one cohort (module docs). */
export class Outbox {
  readonly spec: Spec;
  readonly #key: SigningKey;
  readonly #anchorId: Uint8Array | undefined;
  readonly #queuedPublicationsMax: number;
  readonly #queue: Publication[] = [];
  #stream: Stream | undefined;

  /** Throws `PublisherError` if the key (and for ANCHOR the id) does not fit the binding. */
  constructor(spec: Spec, key: SigningKey, options: OutboxOptions = {}) {
    this.spec = spec;
    this.#key = key;
    this.#anchorId = options.anchorId?.slice();
    this.#queuedPublicationsMax = options.queuedPublicationsMax ?? QUEUED_PUBLICATIONS_MAX_DEFAULT;
    if (authorship(spec) === "implicit") checkShape(spec, key.address, this.#anchorId);
  }

  /** The identity's address (the Join addr). */
  get addr(): Uint8Array {
    return this.#key.address;
  }

  /** Whether this key is the cohort's admin. */
  get isAdmin(): boolean {
    return this.spec.admin !== undefined && equalBytes(this.spec.admin, this.addr);
  }

  /** The role on the current stream (`undefined` between streams). */
  get role(): Role | undefined {
    return this.#stream?.role;
  }

  /** Publications not yet written. */
  get queued(): number {
    return this.#queue.length;
  }

  /** Why a publication of `kind` could not be queued now, if it could not. */
  refusal(kind: Publication["kind"]): PublishFault | undefined {
    if (kind !== Kind.DATA) {
      if (this.spec.admin === undefined) return { code: "no-admin" };
      if (!this.isAdmin) return { code: "not-admin" };
    }
    if (this.#queue.length >= this.#queuedPublicationsMax) return { code: "queue-full", max: this.#queuedPublicationsMax };
    return undefined;
  }

  /** Queues a publication whose index is reserved. Throws `PublishError` or `PayloadError`. */
  enqueue(publication: Publication): void {
    if (publication.kind === Kind.EOS && publication.index !== 0n) throw new RangeError("EOS is always index 0 (R21)");
    const tooHigh = publication.kind !== Kind.EOS && publication.index >= U64_MAX;
    const refused: PublishFault | undefined =
      this.refusal(publication.kind) ?? (tooHigh ? { code: "index-max", kind: publication.kind } : undefined);
    if (refused !== undefined) throw new PublishError(refused, describePublishFault(refused));
    checkPayload(publication.payload);
    this.#queue.push({ ...publication, payload: publication.payload.slice() });
  }

  /** A new stream answered OK with `challenge`: everything from now on is signed under it. */
  beginSession(challenge: Uint8Array): void {
    const mode = authorship(this.spec);
    const role: Role = mode !== "explicit" ? "publisher" : this.isAdmin ? "pending" : "awaiting-roster";
    this.#stream = { challenge: challenge.slice(), role, inFlight: undefined };
  }

  /** The stream ended; queued publications (and the one in flight) wait for the next one. */
  endSession(): void {
    this.#stream = undefined;
  }

  /**
   * A verified roster arrived on this stream: under explicit authorship a non-admin is
   * granted (then claims) or revoked by it. Returns the role after it.
   */
  onRoster(publishers: readonly Uint8Array[]): Role | undefined {
    const stream = this.#stream;
    if (stream === undefined || authorship(this.spec) !== "explicit" || this.isAdmin) return stream?.role;
    const named = publishers.some((entry) => equalBytes(entry, this.addr));
    if (named && (stream.role === "awaiting-roster" || stream.role === "revoked")) stream.role = "pending";
    if (!named && (stream.role === "pending" || stream.role === "publisher")) stream.role = "revoked";
    return stream.role;
  }

  /**
   * The next frame to write on the current stream, signed under its challenge: the claim if
   * pending, else the oldest queued publication; `undefined` when there is nothing to send
   * or nothing may be sent. Call `markSent` once it is written.
   */
  nextFrame(): Outgoing | undefined {
    const stream = this.#stream;
    if (stream === undefined) return undefined;
    let publication: Signable;
    if (stream.role === "pending") {
      publication = CLAIM;
      stream.inFlight = "claim";
    } else if (stream.role === "publisher" && this.#queue.length > 0) {
      publication = this.#queue[0]!;
      stream.inFlight = "head";
    } else {
      return undefined;
    }
    return this.#sign(stream.challenge, publication);
  }

  /** The frame from `nextFrame` is written: a claim makes this a publisher stream, a publication leaves the queue. */
  markSent(): void {
    const stream = this.#stream;
    if (stream === undefined) return;
    if (stream.inFlight === "claim") stream.role = "publisher";
    if (stream.inFlight === "head") this.#queue.shift();
    stream.inFlight = undefined;
  }

  #sign(challenge: Uint8Array, publication: Signable): Outgoing {
    const { kind, index, payload } = publication;
    let signed: SignedFrame;
    let frameIndex: bigint | undefined = index;
    if (authorship(this.spec) === "implicit") {
      frameIndex = this.spec.binding === TopicBinding.FEED_TOPIC ? index : undefined;
      signed = signImplicit(this.#key, this.#implicitId(index), frameIndex, payload);
    } else {
      signed = signBroadcast(this.#key, kind, this.spec.topic, challenge, index, payload);
    }
    const id = signed.chunk.slice(0, 32);
    return { kind, index: frameIndex, id, address: socAddress(id, this.addr), payloadLength: payload.length, signed };
  }

  /** The binding's own id for the publication at `index` (implicit authorship, R11). */
  #implicitId(index: bigint): Uint8Array {
    const topic = this.spec.topic;
    switch (this.spec.binding) {
      case TopicBinding.FEED_TOPIC:
      case TopicBinding.MNEMONIC:
        return feedId(topic, index);
      case TopicBinding.SOC_ID:
        return topic;
      case TopicBinding.ANCHOR:
        // The constructor refused an implicit ANCHOR outbox without the id.
        return this.#anchorId!;
      case TopicBinding.OWNER:
        return mineOwnerId(topic, this.addr, index);
    }
  }
}

function publisherError(fault: PublisherFault, message: string): PublisherError {
  return new PublisherError(fault, message);
}

function checkShape(spec: Spec, address: Uint8Array, anchorId: Uint8Array | undefined): void {
  switch (spec.binding) {
    case TopicBinding.OWNER:
      if (!equalBytes(keccak256(address), spec.topic)) {
        throw publisherError(
          { code: "owner-not-topic", address },
          `binding OWNER needs topic = keccak256(owner); keccak256(0x${toHex(address)}) is ${toHex(keccak256(address))}`,
        );
      }
      return;
    case TopicBinding.ANCHOR:
      if (anchorId === undefined) {
        throw publisherError(
          { code: "anchor-without-id" },
          "binding ANCHOR without admin needs the GSOC id (keccak256(id ‖ owner) = topic)",
        );
      }
      if (!equalBytes(socAddress(anchorId, address), spec.topic)) {
        throw publisherError(
          { code: "anchor-mismatch", address, id: anchorId },
          `binding ANCHOR: keccak256(id ‖ 0x${toHex(address)}) is not the topic`,
        );
      }
      return;
    case TopicBinding.SOC_ID: {
      const po = proximity(socAddress(spec.topic, address), spec.topic);
      if (po < PO_MIN) {
        throw publisherError(
          { code: "soc-id-proximity", address, po },
          `binding ${bindingName(spec.binding)}: keccak256(topic ‖ 0x${toHex(address)}) has proximity ${po} to the topic, below ${PO_MIN}`,
        );
      }
      return;
    }
    case TopicBinding.FEED_TOPIC:
    case TopicBinding.MNEMONIC:
      return;
  }
}

/**
 * An id for implicit OWNER whose chunk address has PO >= 16 with the topic: the first
 * feedId(feedId(topic, index), nonce) that fits (about 65 536 tries on average), as Rust.
 */
export function mineOwnerId(topic: Uint8Array, owner: Uint8Array, index: bigint): Uint8Array {
  const base = feedId(topic, index);
  for (let nonce = 0n; ; nonce++) {
    const id = feedId(base, nonce);
    if (proximity(socAddress(id, owner), topic) >= PO_MIN) return id;
  }
}
