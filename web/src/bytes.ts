/**
 * Byte-level helpers shared by every module: sizes of the protocol's fixed-length values,
 * hex, concatenation, comparison and the 64-bit integer encodings the wire uses.
 *
 * Owns: `ADDRESS_BYTES`, `HASH_BYTES`, `U64_MAX`, `toHex`/`fromHex`, `concatBytes`,
 * `equalBytes`, `be64`, `le64`, `readLe64`, `utf8`.
 *
 * Never: hashes, signs or interprets bytes; every function is pure and copies nothing it
 * does not return.
 */

import { BpsError } from "./errors.js";

/** An Ethereum-style address: admin, stream addr, chunk owner, roster entry. */
export const ADDRESS_BYTES = 20;
/** A keccak256 output: topics, challenges, chunk ids and addresses. */
export const HASH_BYTES = 32;
/** The largest uint64, the top of every index sequence. */
export const U64_MAX = (1n << 64n) - 1n;

const HEX_DIGITS = "0123456789abcdef";

/** Lowercase hex without `0x`. */
export function toHex(bytes: Uint8Array): string {
  let hex = "";
  for (const byte of bytes) {
    hex += HEX_DIGITS[byte >> 4]! + HEX_DIGITS[byte & 0x0f]!;
  }
  return hex;
}

/** Why a string is not hex of the expected length. */
export type HexFault =
  | { readonly code: "hex-odd-length"; readonly chars: number }
  | { readonly code: "hex-not-hex"; readonly position: number }
  | { readonly code: "hex-length"; readonly bytes: number; readonly expected: number };

/** A caller-supplied hex string that is not what was asked for. */
export class HexError extends BpsError<HexFault> {}

function describeHex(fault: HexFault): string {
  switch (fault.code) {
    case "hex-odd-length":
      return `hex string has an odd number of digits (${fault.chars})`;
    case "hex-not-hex":
      return `hex string has a non-hex character at position ${fault.position}`;
    case "hex-length":
      return `expected ${fault.expected} bytes of hex, got ${fault.bytes}`;
  }
}

/**
 * Hex (optionally `0x`-prefixed, any case) to bytes; with `expectedBytes`, the length is
 * checked too. Throws `HexError`.
 */
export function fromHex(hex: string, expectedBytes?: number): Uint8Array {
  const digits = hex.startsWith("0x") || hex.startsWith("0X") ? hex.slice(2) : hex;
  if (digits.length % 2 !== 0) {
    throw fault({ code: "hex-odd-length", chars: digits.length });
  }
  const bytes = new Uint8Array(digits.length / 2);
  for (let position = 0; position < digits.length; position += 2) {
    const high = HEX_DIGITS.indexOf(digits[position]!.toLowerCase());
    const low = HEX_DIGITS.indexOf(digits[position + 1]!.toLowerCase());
    if (high < 0 || low < 0) {
      throw fault({ code: "hex-not-hex", position: high < 0 ? position : position + 1 });
    }
    bytes[position / 2] = (high << 4) | low;
  }
  if (expectedBytes !== undefined && bytes.length !== expectedBytes) {
    throw fault({ code: "hex-length", bytes: bytes.length, expected: expectedBytes });
  }
  return bytes;
}

function fault(hexFault: HexFault): HexError {
  return new HexError(hexFault, describeHex(hexFault));
}

/** The parts one after another, in a new array. */
export function concatBytes(...parts: readonly Uint8Array[]): Uint8Array {
  let length = 0;
  for (const part of parts) length += part.length;
  const joined = new Uint8Array(length);
  let offset = 0;
  for (const part of parts) {
    joined.set(part, offset);
    offset += part.length;
  }
  return joined;
}

/** Whether two byte strings are equal (not constant-time: nothing here is secret). */
export function equalBytes(one: Uint8Array, other: Uint8Array): boolean {
  if (one.length !== other.length) return false;
  for (let position = 0; position < one.length; position++) {
    if (one[position] !== other[position]) return false;
  }
  return true;
}

function checkU64(value: bigint): void {
  if (value < 0n || value > U64_MAX) {
    throw new RangeError(`${value} is not a uint64`);
  }
}

/** `value` as 8 bytes big-endian (feed ids). A value outside uint64 is a caller bug. */
export function be64(value: bigint): Uint8Array {
  checkU64(value);
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, value, false);
  return bytes;
}

/** `value` as 8 bytes little-endian (the span). A value outside uint64 is a caller bug. */
export function le64(value: bigint): Uint8Array {
  checkU64(value);
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, value, true);
  return bytes;
}

/** The first 8 bytes of `bytes` as a little-endian uint64. */
export function readLe64(bytes: Uint8Array): bigint {
  return new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
}

/** UTF-8 bytes of a string. */
export function utf8(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}
