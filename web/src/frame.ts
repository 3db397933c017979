/**
 * Frames: an unsigned LEB128 varint length, then that many protobuf bytes (docs/PROTOCOL.md
 * §1 and §2, bee's delimited protobuf streams). On the native WebSocket endpoint every binary
 * message is exactly one such frame, prefix included: byte for byte what a TCP stream
 * carries.
 *
 * Owns: the frame size limits, `encodeFrame`, `peekFrame` (the length prefix, checked
 * against the cap before any body byte is awaited), `FrameReader` (frames out of a byte
 * stream, resuming across partial reads) and `decodeFrameMessage` (one WebSocket message
 * that must be exactly one frame).
 *
 * Never: decodes protobuf (that is `wire.ts`), touches a socket, or allocates for a peer's
 * declared length: an oversize length is refused as soon as its varint is complete. A short
 * buffer is never an error, only "need more" (`undefined`).
 */

import { type Result, fail, ok } from "./errors.js";

/** Largest SOC a `Broadcast` carries: id 32 + signature 65 + span 8 + payload 4096. */
export const SOC_BYTES_MAX = 4201;

/**
 * The largest valid `Broadcast` body: a 4201-byte soc (key 1 + length 2), kind (1 + 1), a
 * 32-byte challenge (1 + 1 + 32) and index 2^64-1 (1 + 10).
 */
export const BROADCAST_FRAME_BYTES_MAX = 1 + 2 + SOC_BYTES_MAX + 2 + 34 + 11;

/**
 * Default cap on a frame body, the same as the broker's: the largest valid Broadcast plus
 * headroom for unknown fields, 16x below bee's 128 KiB, so a peer cannot make us buffer much.
 */
export const FRAME_BYTES_MAX_DEFAULT = 8192;

/** Longest LEB128 encoding of a uint64: 64 bits at 7 bits per byte. */
const VARINT_BYTES_MAX = 10;

if (FRAME_BYTES_MAX_DEFAULT < BROADCAST_FRAME_BYTES_MAX) {
  throw new Error("FRAME_BYTES_MAX_DEFAULT must hold the largest valid Broadcast");
}

/** A fault in the framing layer; it ends the stream. */
export type FrameFault =
  | { readonly code: "frame-too-large"; readonly bytes: bigint; readonly max: number }
  | { readonly code: "varint-too-long" }
  | { readonly code: "varint-overflow" };

/** A WebSocket message that is not exactly one frame. */
export type FrameMessageFault =
  | FrameFault
  | { readonly code: "frame-incomplete"; readonly declared: number; readonly present: number }
  | { readonly code: "frame-trailing-bytes"; readonly extra: number };

/** Text for a framing fault. */
export function describeFrameFault(fault: FrameMessageFault): string {
  switch (fault.code) {
    case "frame-too-large":
      return `frame of ${fault.bytes} bytes exceeds the ${fault.max}-byte cap`;
    case "varint-too-long":
      return `frame length varint is longer than ${VARINT_BYTES_MAX} bytes`;
    case "varint-overflow":
      return "frame length varint overflows u64";
    case "frame-incomplete":
      return `incomplete frame: the prefix declares ${fault.declared} body bytes, ${fault.present} follow`;
    case "frame-trailing-bytes":
      return `${fault.extra} bytes after the frame in one message`;
  }
}

/** Where a frame sits at the front of a buffer, once its length varint is complete. */
export interface FrameHeader {
  /** Bytes of the length varint. */
  readonly prefixBytes: number;
  /** Bytes of the body that follows, already within the cap. */
  readonly bodyBytes: number;
}

/**
 * Reads the length prefix at the front of `buffer` without consuming anything.
 * `ok(undefined)`: the varint is not complete yet. A length above `frameBytesMax` is
 * refused here, whether or not the body has arrived.
 */
export function peekFrame(buffer: Uint8Array, frameBytesMax: number): Result<FrameHeader | undefined, FrameFault> {
  let declared = 0n;
  const limit = Math.min(buffer.length, VARINT_BYTES_MAX);
  for (let position = 0; position < limit; position++) {
    const byte = buffer[position]!;
    const lowBits = BigInt(byte & 0x7f);
    const more = (byte & 0x80) !== 0;
    if (position === VARINT_BYTES_MAX - 1) {
      if (more) return fail({ code: "varint-too-long" });
      if (lowBits > 1n) return fail({ code: "varint-overflow" });
    }
    declared |= lowBits << BigInt(7 * position);
    if (!more) {
      if (declared > BigInt(frameBytesMax)) {
        return fail({ code: "frame-too-large", bytes: declared, max: frameBytesMax });
      }
      return ok({ prefixBytes: position + 1, bodyBytes: Number(declared) });
    }
  }
  return ok(undefined);
}

/** The varint length of `body`, then `body`: one frame. */
export function encodeFrame(body: Uint8Array): Uint8Array {
  const prefix: number[] = [];
  let remaining = body.length;
  while (remaining >= 0x80) {
    prefix.push((remaining & 0x7f) | 0x80);
    remaining >>>= 7;
  }
  prefix.push(remaining);
  const frame = new Uint8Array(prefix.length + body.length);
  frame.set(prefix, 0);
  frame.set(body, prefix.length);
  return frame;
}

/**
 * One WebSocket message of the native endpoint: exactly one frame, prefix and body, nothing
 * more or less. Returns the body (a view into `message`).
 */
export function decodeFrameMessage(message: Uint8Array, frameBytesMax: number): Result<Uint8Array, FrameMessageFault> {
  const peeked = peekFrame(message, frameBytesMax);
  if (!peeked.ok) return peeked;
  const header = peeked.value;
  if (header === undefined) {
    return fail({ code: "frame-incomplete", declared: 0, present: 0 });
  }
  const total = header.prefixBytes + header.bodyBytes;
  if (message.length < total) {
    return fail({
      code: "frame-incomplete",
      declared: header.bodyBytes,
      present: message.length - header.prefixBytes,
    });
  }
  if (message.length > total) {
    return fail({ code: "frame-trailing-bytes", extra: message.length - total });
  }
  return ok(message.subarray(header.prefixBytes, total));
}

/**
 * Frames out of a byte stream (TCP-like transports, and the tests that split every frame
 * at every byte boundary). Bytes are appended with `push`; `next` takes one whole frame's
 * body off the front, or says "need more". After a fault the reader is unusable: the
 * stream must end.
 */
export class FrameReader {
  readonly #frameBytesMax: number;
  #buffer: Uint8Array = new Uint8Array(0);

  constructor(frameBytesMax: number = FRAME_BYTES_MAX_DEFAULT) {
    this.#frameBytesMax = frameBytesMax;
  }

  /** Bytes held that are not yet a whole frame. */
  get buffered(): number {
    return this.#buffer.length;
  }

  /** Appends bytes as they arrived. */
  push(bytes: Uint8Array): void {
    const joined = new Uint8Array(this.#buffer.length + bytes.length);
    joined.set(this.#buffer, 0);
    joined.set(bytes, this.#buffer.length);
    this.#buffer = joined;
  }

  /** The next frame's body, `ok(undefined)` if it has not fully arrived, or the fault. */
  next(): Result<Uint8Array | undefined, FrameFault> {
    const peeked = peekFrame(this.#buffer, this.#frameBytesMax);
    if (!peeked.ok) return peeked;
    if (peeked.value === undefined) return ok(undefined);
    const total = peeked.value.prefixBytes + peeked.value.bodyBytes;
    if (this.#buffer.length < total) return ok(undefined);
    const body = this.#buffer.slice(peeked.value.prefixBytes, total);
    this.#buffer = this.#buffer.slice(total);
    return ok(body);
  }
}
