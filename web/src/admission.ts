/**
 * End-to-end verification of every received `Broadcast` (R41; SWIP-60 conformance items 2
 * and 10, SWIP-74 item 10), exactly as the Rust `bps_bench::subscriber` does it.
 *
 * Owns: `Admission`, the receiving side's state for one cohort (the roster and its cursor,
 * a bounded table of per-publisher DATA cursors, per owner under implicit FEED_TOPIC too,
 * the bounded implicit dedup window) and the
 * typed `Verdict` each frame becomes. For every frame:
 * 1. the kind must be known (else dropped, R14, D12); AUTH is never delivered;
 * 2. explicit and ALL: the id is derived from the frame's own kind, the cohort topic, the
 *    frame's challenge and index and must equal the chunk's id (the challenge is compared
 *    with nothing);
 * 3. the owner is recovered and admitted: admin or rostered under explicit authorship,
 *    anyone under ALL; under implicit authorship the binding's shape decides (`shape.ts`);
 *    service chunks (ROSTER, EOS) must validate at keccak256(id ‖ admin), so the roster is
 *    taken only from the admin's ROSTER feed;
 * 4. cursors: a DATA index below its publisher's cursor and a ROSTER index below the roster
 *    cursor are retransmits; an index above the cursor of a feed already seen is reported
 *    on the verdict (`gap`) and the delivery still applies: for ROSTER, once a roster has
 *    been seen, a liveness fault (R41); for DATA, updates skipped or missed (R27 allows
 *    it), while a publisher's first frame, or its first after an eviction, is never a gap.
 *    Under implicit FEED_TOPIC each owner (the recovered signer of a graffiti-feed update)
 *    has a cursor in the same bounded table, one past the highest feed index seen from it,
 *    and an index above it is a gap in the same way; a lower index is no retransmit there
 *    (dedup is the R28 window, and a writer may publish out of order): it is delivered,
 *    without a gap, and leaves the cursor where it was. The other implicit bindings have no
 *    index sequence, so no cursor and no gap;
 * 5. an accepted DATA or ROSTER names where the next update of its feed will be (`next`, a
 *    `NextUpdate`: its index and SOC address), which an application can wait for or fetch
 *    from Swarm storage, as the Rust client's `Received::next`. With n = index + 1: on a
 *    session feed (explicit and ALL) keccak256(keccak256(topic_s ‖ be64(n)) ‖ owner), with
 *    the frame's own kind (DATA: no prefix; ROSTER: the service prefix, owner = admin) and
 *    the frame's own challenge, so it is the next update on the same stream (a publisher
 *    that reconnects signs under a new challenge); under implicit FEED_TOPIC
 *    keccak256(keccak256(topic ‖ be64(n)) ‖ owner), the feed update at n. None under the
 *    other implicit bindings (no sequence of ids), for EOS, or when n would be 2^64 - 1,
 *    which no publisher may use (D13).
 *
 * Never: reads a socket, a clock or a store (the `Subscriber` persists `snapshot()`), looks
 * at its own stream's challenge, or throws on a peer's frame: every failure is a `dropped`
 * verdict with a typed reason.
 */

import { ADDRESS_BYTES, HASH_BYTES, U64_MAX, equalBytes, fromHex, toHex } from "./bytes.js";
import { type KnownKind, feedId, knownKind, sessionChunkId, socAddress } from "./chunkId.js";
import { CursorTable, type EvictedCursor } from "./cursorTable.js";
import { DedupWindow } from "./dedupWindow.js";
import { type Result, fail, ok } from "./errors.js";
import { Kind, TopicBinding } from "./gen/bps_pb.js";
import { type RosterFault, decodeRoster } from "./roster.js";
import { type ShapeFault, checkImplicit } from "./shape.js";
import {
  SOC_MIN_CHUNK_SIZE,
  type SocFault,
  type SocValidator,
  type SocView,
  parseSoc,
  spanValue,
  validateSoc,
  validateSocAt,
} from "./soc.js";
import { type Spec, authorship } from "./spec.js";
import { type Broadcast, type DecodeFault, decodeBroadcast } from "./wire.js";

/**
 * Per-publisher DATA cursors kept per cohort: more than any roster or chat a browser tab
 * follows, and it bounds both memory and the stored snapshot (about 64 KiB of JSON).
 */
export const CURSORS_MAX_DEFAULT = 1024;
/** Chunks remembered for implicit-authorship dedup (R28), as the Rust subscriber. */
export const DEDUP_WINDOW_CHUNKS_DEFAULT = 4096;

/** An index above the one expected on a feed already seen: updates were missed. */
export interface IndexGap {
  readonly expected: bigint;
  readonly got: bigint;
}

/** Where the next update of a delivery's feed will be (module docs, item 5). */
export interface NextUpdate {
  /** Its index on the feed. */
  readonly index: bigint;
  /** Its SOC address keccak256(id ‖ owner). */
  readonly address: Uint8Array;
}

/** A verified publication. */
export interface DataVerdict {
  readonly type: "data";
  /** The recovered, admitted signer. */
  readonly owner: Uint8Array;
  /** The frame's index (0 when unset under implicit authorship). */
  readonly index: bigint;
  readonly payload: Uint8Array;
  /** The chunk's SOC address keccak256(id ‖ owner). */
  readonly address: Uint8Array;
  /** This publisher's next update, where the feed defines one (module docs, item 5). */
  readonly next?: NextUpdate;
  /** Updates from this publisher were skipped or missed (module docs, item 4). */
  readonly gap?: IndexGap;
  /** A cursor this publisher's new one pushed out of the bounded table. */
  readonly evicted?: EvictedCursor;
}

/** A verified ROSTER from the admin, now in force. */
export interface RosterVerdict {
  readonly type: "roster";
  readonly index: bigint;
  readonly publishers: readonly Uint8Array[];
  readonly address: Uint8Array;
  /** The admin's next ROSTER on this session feed (module docs, item 5). */
  readonly next?: NextUpdate;
  /** Rosters were missed (a liveness fault, R41). */
  readonly gap?: IndexGap;
}

/** Why a frame was dropped; none of these is fatal to the subscription. */
export type DropReason =
  | { readonly code: "malformed"; readonly fault: DecodeFault }
  | { readonly code: "unknown-kind"; readonly value: number }
  | { readonly code: "auth-delivered" }
  | { readonly code: "service-without-admin"; readonly kind: KnownKind }
  | { readonly code: "challenge-length"; readonly bytes: number }
  | { readonly code: "not-a-soc"; readonly fault: SocFault }
  | { readonly code: "id-mismatch"; readonly expected: Uint8Array; readonly actual: Uint8Array }
  | { readonly code: "invalid-soc"; readonly fault: SocFault }
  | { readonly code: "shape"; readonly fault: ShapeFault }
  | { readonly code: "not-admitted"; readonly owner: Uint8Array }
  | { readonly code: "retransmit"; readonly kind: KnownKind; readonly index: bigint; readonly cursor: bigint }
  | { readonly code: "duplicate"; readonly key: Uint8Array }
  | { readonly code: "index-max"; readonly kind: KnownKind }
  | { readonly code: "invalid-roster"; readonly fault: RosterFault }
  | { readonly code: "malformed-eos"; readonly index: bigint; readonly span: bigint; readonly payloadLength: number };

/** What one received frame turned out to be. */
export type Verdict = DataVerdict | RosterVerdict | { readonly type: "eos" } | { readonly type: "dropped"; readonly reason: DropReason };

/** Bounds of an `Admission`. */
export interface AdmissionOptions {
  /** Per-publisher cursors kept (default `CURSORS_MAX_DEFAULT`). */
  readonly cursorsMax?: number;
  /** Implicit dedup window in chunks (default `DEDUP_WINDOW_CHUNKS_DEFAULT`). */
  readonly dedupWindowChunks?: number;
  /**
   * What checks a chunk's signature and address (default `validateSoc`): a page can hand
   * this costly part to a Web Worker and give here what the worker found for those bytes.
   */
  readonly validateSoc?: SocValidator;
}

/** The persistent part of an `Admission`, as JSON-ready values. */
export interface AdmissionSnapshot {
  readonly version: 1;
  readonly rosterSeen: boolean;
  /** Decimal. */
  readonly rosterCursor: string;
  /** Hex addresses. */
  readonly roster: readonly string[];
  /** [owner hex, next index decimal], least recently advanced first. */
  readonly cursors: ReadonlyArray<readonly [string, string]>;
}

/** A stored snapshot that cannot be restored (the state then starts empty). */
export interface SnapshotFault {
  readonly code: "snapshot-invalid";
  readonly detail: string;
}

function drop(reason: DropReason): Verdict {
  return { type: "dropped", reason };
}

type Admitted = Result<Verdict, DropReason>;

/**
 * The update after `index` on a feed whose ids `idAt` gives, signed by `owner`; none when
 * its index would be 2^64-1, which no publisher may use (D13).
 */
function nextUpdate(index: bigint, idAt: (next: bigint) => Uint8Array, owner: Uint8Array): NextUpdate | undefined {
  const next = index + 1n;
  return next < U64_MAX ? { index: next, address: socAddress(idAt(next), owner) } : undefined;
}

/** The update after `index` on the session feed of `kind` under `challenge` (module docs, item 5). */
function nextOnSessionFeed(spec: Spec, kind: KnownKind, challenge: Uint8Array, index: bigint, owner: Uint8Array): NextUpdate | undefined {
  return nextUpdate(index, (next) => sessionChunkId(kind, spec.topic, challenge, next), owner);
}

/** The receiving side of one cohort (module docs). */
export class Admission {
  readonly spec: Spec;
  #roster: Uint8Array[] = [];
  #rosterCursor = 0n;
  #rosterSeen = false;
  readonly #cursors: CursorTable;
  readonly #seen: DedupWindow;
  readonly #validate: SocValidator;

  constructor(spec: Spec, options: AdmissionOptions = {}) {
    this.spec = spec;
    this.#validate = options.validateSoc ?? validateSoc;
    this.#cursors = new CursorTable(options.cursorsMax ?? CURSORS_MAX_DEFAULT);
    this.#seen = new DedupWindow(options.dedupWindowChunks ?? DEDUP_WINDOW_CHUNKS_DEFAULT);
  }

  /** The roster in force (empty until the first ROSTER). */
  get roster(): readonly Uint8Array[] {
    return this.#roster;
  }

  /** The next ROSTER index expected. */
  get rosterCursor(): bigint {
    return this.#rosterCursor;
  }

  /**
   * The next DATA index expected from `owner` (0 if never seen or evicted; under implicit
   * FEED_TOPIC one past the highest feed index seen from it).
   */
  cursor(owner: Uint8Array): bigint {
    return this.#cursors.get(owner) ?? 0n;
  }

  /** Per-publisher cursors held. */
  get cursorCount(): number {
    return this.#cursors.size;
  }

  /** Whether `owner` may publish DATA now (implicit: the shape decides per chunk). */
  admits(owner: Uint8Array): boolean {
    if (authorship(this.spec) !== "explicit") return true;
    const admin = this.spec.admin;
    return (admin !== undefined && equalBytes(admin, owner)) || this.#roster.some((entry) => equalBytes(entry, owner));
  }

  /** Decodes and verifies one frame body. */
  onFrame(body: Uint8Array): Verdict {
    const decoded = decodeBroadcast(body);
    return decoded.ok ? this.onBroadcast(decoded.value) : drop({ code: "malformed", fault: decoded.fault });
  }

  /** Verifies one `Broadcast` (module docs) and applies it. */
  onBroadcast(broadcast: Broadcast): Verdict {
    const admitted = this.#admit(broadcast);
    return admitted.ok ? admitted.value : drop(admitted.fault);
  }

  #admit(broadcast: Broadcast): Admitted {
    const kind = knownKind(broadcast.kind);
    if (kind === undefined) return fail({ code: "unknown-kind", value: broadcast.kind });
    if (kind === Kind.AUTH) return fail({ code: "auth-delivered" });
    const admin = this.spec.admin;
    if (admin === undefined) {
      return kind === Kind.DATA ? this.#admitImplicit(broadcast) : fail({ code: "service-without-admin", kind });
    }
    if (broadcast.challenge.length !== HASH_BYTES) {
      return fail({ code: "challenge-length", bytes: broadcast.challenge.length });
    }
    const parsed = parseSoc(broadcast.soc);
    if (!parsed.ok) return fail({ code: "not-a-soc", fault: parsed.fault });
    const soc = parsed.value;
    const expected = sessionChunkId(kind, this.spec.topic, broadcast.challenge, broadcast.index);
    if (!equalBytes(soc.id, expected)) return fail({ code: "id-mismatch", expected, actual: soc.id.slice() });
    switch (kind) {
      case Kind.ROSTER:
        return this.#admitRoster(admin, broadcast, soc);
      case Kind.EOS:
        return admitEos(admin, broadcast, soc, this.#validate);
      case Kind.DATA:
        return this.#admitData(broadcast, soc);
    }
  }

  #admitData(broadcast: Broadcast, soc: SocView): Admitted {
    const valid = this.#validate(broadcast.soc);
    if (!valid.ok) return fail({ code: "invalid-soc", fault: valid.fault });
    const { owner, address } = valid.value;
    if (!this.admits(owner)) return fail({ code: "not-admitted", owner });
    const index = broadcast.index;
    if (index === U64_MAX) return fail({ code: "index-max", kind: Kind.DATA });
    const known = this.#cursors.get(owner);
    const cursor = known ?? 0n;
    if (index < cursor) return fail({ code: "retransmit", kind: Kind.DATA, index, cursor });
    const evicted = this.#cursors.advance(owner, index + 1n);
    const next = nextOnSessionFeed(this.spec, Kind.DATA, broadcast.challenge, index, owner);
    return ok({
      type: "data",
      owner,
      index,
      payload: soc.payload.slice(),
      address,
      ...(next === undefined ? {} : { next }),
      ...(known !== undefined && index > known ? { gap: { expected: known, got: index } } : {}),
      ...(evicted === undefined ? {} : { evicted }),
    });
  }

  #admitRoster(admin: Uint8Array, broadcast: Broadcast, soc: SocView): Admitted {
    const valid = validateSocAt(broadcast.soc, socAddress(soc.id, admin), this.#validate);
    if (!valid.ok) return fail({ code: "invalid-soc", fault: valid.fault });
    const index = broadcast.index;
    if (index === U64_MAX) return fail({ code: "index-max", kind: Kind.ROSTER });
    if (index < this.#rosterCursor) {
      return fail({ code: "retransmit", kind: Kind.ROSTER, index, cursor: this.#rosterCursor });
    }
    const publishers = decodeRoster(soc.payload);
    if (!publishers.ok) return fail({ code: "invalid-roster", fault: publishers.fault });
    // The first roster a subscriber sees is the latest one (R22), whatever its index; after
    // that, every index must follow the last.
    const gap = this.#rosterSeen && index > this.#rosterCursor ? { expected: this.#rosterCursor, got: index } : undefined;
    this.#rosterSeen = true;
    this.#rosterCursor = index + 1n;
    this.#roster = publishers.value;
    const next = nextOnSessionFeed(this.spec, Kind.ROSTER, broadcast.challenge, index, admin);
    return ok({
      type: "roster",
      index,
      publishers: [...publishers.value],
      address: valid.value.address,
      ...(next === undefined ? {} : { next }),
      ...(gap === undefined ? {} : { gap }),
    });
  }

  #admitImplicit(broadcast: Broadcast): Admitted {
    const valid = this.#validate(broadcast.soc);
    if (!valid.ok) return fail({ code: "invalid-soc", fault: valid.fault });
    const recovered = valid.value;
    const { topic, binding } = this.spec;
    const shaped = checkImplicit(binding, topic, broadcast.index, recovered);
    if (!shaped.ok) return fail({ code: "shape", fault: shaped.fault });
    if (!this.#seen.insert(shaped.value)) return fail({ code: "duplicate", key: shaped.value });
    const { owner, address } = recovered;
    const index = broadcast.index;
    const verdict: DataVerdict = { type: "data", owner, index, payload: broadcast.soc.slice(SOC_MIN_CHUNK_SIZE), address };
    if (binding !== TopicBinding.FEED_TOPIC) return ok(verdict);
    const next = nextUpdate(index, (at) => feedId(topic, at), owner);
    const { gap, evicted } = this.#followFeedWriter(owner, index);
    return ok({
      ...verdict,
      ...(next === undefined ? {} : { next }),
      ...(gap === undefined ? {} : { gap }),
      ...(evicted === undefined ? {} : { evicted }),
    });
  }

  /**
   * Implicit FEED_TOPIC: moves `owner`'s cursor past the highest index seen and returns the
   * gap above the cursor it had and the cursor its arrival evicted (module docs, item 4). A
   * lower index leaves the cursor where it was (the owner still becomes the most recent in
   * the table: it is writing).
   */
  #followFeedWriter(owner: Uint8Array, index: bigint): { gap?: IndexGap; evicted?: EvictedCursor } {
    const known = this.#cursors.get(owner);
    // Index 2^64-1 passes the implicit shape; no index lies above it, so a cursor held there
    // reports no gap, needs no room past it, and stays a uint64 in the snapshot.
    const past = index < U64_MAX ? index + 1n : U64_MAX;
    const cursor = known !== undefined && known > past ? known : past;
    const evicted = this.#cursors.advance(owner, cursor);
    return {
      ...(known !== undefined && index > known ? { gap: { expected: known, got: index } } : {}),
      ...(evicted === undefined ? {} : { evicted }),
    };
  }

  /** The roster, its cursor and the per-publisher cursors, for the caller's store. */
  snapshot(): AdmissionSnapshot {
    return {
      version: 1,
      rosterSeen: this.#rosterSeen,
      rosterCursor: this.#rosterCursor.toString(),
      roster: this.#roster.map(toHex),
      cursors: this.#cursors.entries().map(([owner, next]) => [owner, next.toString()] as const),
    };
  }

  /**
   * Takes over a stored snapshot (from `snapshot()` of a previous session or page load).
   * Nothing changes if it does not validate. Beyond the table's bound, the most recently
   * advanced cursors are kept.
   */
  restore(stored: unknown): Result<void, SnapshotFault> {
    const parsed = parseSnapshot(stored);
    if (!parsed.ok) return parsed;
    const { rosterSeen, rosterCursor, roster, cursors } = parsed.value;
    this.#rosterSeen = rosterSeen;
    this.#rosterCursor = rosterCursor;
    this.#roster = roster;
    this.#cursors.clear();
    for (const [owner, next] of cursors.slice(-this.#cursors.max)) this.#cursors.advance(owner, next);
    return ok(undefined);
  }
}

function admitEos(admin: Uint8Array, broadcast: Broadcast, soc: SocView, validate: SocValidator): Admitted {
  const span = spanValue(soc);
  if (broadcast.index !== 0n || span !== 0n || soc.payload.length !== 0) {
    return fail({ code: "malformed-eos", index: broadcast.index, span, payloadLength: soc.payload.length });
  }
  const valid = validateSocAt(broadcast.soc, socAddress(soc.id, admin), validate);
  return valid.ok ? ok({ type: "eos" }) : fail({ code: "invalid-soc", fault: valid.fault });
}

interface ParsedSnapshot {
  rosterSeen: boolean;
  rosterCursor: bigint;
  roster: Uint8Array[];
  cursors: Array<[Uint8Array, bigint]>;
}

function snapshotFault(detail: string): { ok: false; fault: SnapshotFault } {
  return fail({ code: "snapshot-invalid", detail });
}

function parseIndex(value: unknown): bigint | undefined {
  if (typeof value !== "string" || !/^(0|[1-9][0-9]*)$/.test(value)) return undefined;
  const index = BigInt(value);
  return index <= U64_MAX ? index : undefined;
}

function parseAddress(value: unknown): Uint8Array | undefined {
  return typeof value === "string" && /^[0-9a-f]{40}$/.test(value) ? fromHex(value, ADDRESS_BYTES) : undefined;
}

function parseSnapshot(stored: unknown): Result<ParsedSnapshot, SnapshotFault> {
  if (typeof stored !== "object" || stored === null) return snapshotFault("not an object");
  const record = stored as Record<string, unknown>;
  if (record["version"] !== 1) return snapshotFault(`version ${String(record["version"])}, expected 1`);
  if (typeof record["rosterSeen"] !== "boolean") return snapshotFault("rosterSeen is not a boolean");
  const rosterCursor = parseIndex(record["rosterCursor"]);
  if (rosterCursor === undefined) return snapshotFault("rosterCursor is not a uint64 in decimal");
  const rosterValue = record["roster"];
  if (!Array.isArray(rosterValue)) return snapshotFault("roster is not an array");
  const roster: Uint8Array[] = [];
  for (const entry of rosterValue) {
    const address = parseAddress(entry);
    if (address === undefined) return snapshotFault("a roster entry is not a 20-byte hex address");
    roster.push(address);
  }
  const cursorsValue = record["cursors"];
  if (!Array.isArray(cursorsValue)) return snapshotFault("cursors is not an array");
  const cursors: Array<[Uint8Array, bigint]> = [];
  for (const entry of cursorsValue) {
    const owner = Array.isArray(entry) && entry.length === 2 ? parseAddress(entry[0]) : undefined;
    const next = Array.isArray(entry) && entry.length === 2 ? parseIndex(entry[1]) : undefined;
    if (owner === undefined || next === undefined) return snapshotFault("a cursor is not [hex address, decimal index]");
    cursors.push([owner, next]);
  }
  return ok({ rosterSeen: record["rosterSeen"], rosterCursor, roster, cursors });
}
