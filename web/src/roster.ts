/**
 * The `Roster` payload of a ROSTER chunk (R20): the admin's current publishers.
 *
 * Owns: encoding a list of addresses and decoding one strictly, every entry exactly 20
 * bytes, on the generated `Roster` type.
 *
 * Never: legitimacy (whether the chunk came from the admin, its index and cursor), which
 * is `admission.ts`'s; duplicates and order are kept as sent.
 */

import { create, toBinary } from "@bufbuild/protobuf";

import { ADDRESS_BYTES } from "./bytes.js";
import { type Result, fail, ok } from "./errors.js";
import { RosterSchema } from "./gen/bps_pb.js";
import { describeDecodeFault, decodeMessage } from "./wire.js";

/** A ROSTER payload that is not a list of 20-byte addresses (`invalid_roster`). */
export type RosterFault =
  | { readonly code: "roster-malformed"; readonly detail: string }
  | { readonly code: "roster-entry-length"; readonly index: number; readonly bytes: number };

/** Text for a roster fault. */
export function describeRosterFault(fault: RosterFault): string {
  switch (fault.code) {
    case "roster-malformed":
      return `malformed Roster payload: ${fault.detail}`;
    case "roster-entry-length":
      return `Roster entry ${fault.index} is ${fault.bytes} bytes, expected ${ADDRESS_BYTES}`;
  }
}

/** The protobuf `Roster { publishers }`, in order: a ROSTER chunk's payload. */
export function encodeRoster(publishers: readonly Uint8Array[]): Uint8Array {
  for (const address of publishers) {
    if (address.length !== ADDRESS_BYTES) throw new RangeError(`roster entry of ${address.length} bytes`);
  }
  return toBinary(RosterSchema, create(RosterSchema, { publishers: [...publishers] }));
}

/** Decodes a ROSTER chunk's payload; every entry must be exactly 20 bytes. */
export function decodeRoster(payload: Uint8Array): Result<Uint8Array[], RosterFault> {
  const decoded = decodeMessage(RosterSchema, "Roster", payload);
  if (!decoded.ok) return fail({ code: "roster-malformed", detail: describeDecodeFault(decoded.fault) });
  const publishers = decoded.value.publishers;
  for (const [index, entry] of publishers.entries()) {
    if (entry.length !== ADDRESS_BYTES) return fail({ code: "roster-entry-length", index, bytes: entry.length });
  }
  return ok(publishers.map((entry) => entry.slice()));
}
