/**
 * The protobuf messages of the wire (docs/PROTOCOL.md §1), generated from `proto/bps.proto`
 * into `src/gen/` by `npm run generate`: their codecs, and frames of them.
 *
 * Owns: decoding `Join`, `Ack` and `Broadcast` bodies into the generated types with a typed
 * fault, and encoding them as bodies and frames. Unknown fields are dropped on decode
 * (bee re-marshals known fields only); unknown enum values are kept as numbers, so a
 * receiver can name them (R14).
 *
 * Never: validates what a message means (`spec.ts`, `admission.ts`), or keeps a second
 * copy of a field number or enum value: those live only in the `.proto`.
 */

import { type DescMessage, type MessageShape, create, fromBinary, toBinary } from "@bufbuild/protobuf";

import { type Result, fail, ok } from "./errors.js";
import { encodeFrame } from "./frame.js";
import { type Ack, AckSchema, type Broadcast, BroadcastSchema, type Join, JoinSchema, Kind, Status } from "./gen/bps_pb.js";

export {
  type Ack,
  AckSchema,
  type Broadcast,
  BroadcastSchema,
  type CohortSpec,
  CohortSpecSchema,
  type Join,
  JoinSchema,
  Kind,
  PublisherRegime,
  type Roster,
  RosterSchema,
  Status,
  TopicBinding,
} from "./gen/bps_pb.js";

/** Which message a body was decoded as (the direction and the role decide, no envelope). */
export type FrameType = "Join" | "Ack" | "Broadcast" | "Roster";

/** A body that is not valid protobuf for the message it must be. */
export interface DecodeFault {
  readonly code: "malformed";
  readonly frame: FrameType;
  readonly bytes: number;
  readonly detail: string;
}

/** Text for a decode fault. */
export function describeDecodeFault(fault: DecodeFault): string {
  return `malformed ${fault.frame} of ${fault.bytes} bytes: ${fault.detail}`;
}

/** Decodes `body` as `schema`'s message, dropping unknown fields. */
export function decodeMessage<Desc extends DescMessage>(
  schema: Desc,
  frame: FrameType,
  body: Uint8Array,
): Result<MessageShape<Desc>, DecodeFault> {
  try {
    return ok(fromBinary(schema, body, { readUnknownFields: false }));
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    return fail({ code: "malformed", frame, bytes: body.length, detail });
  }
}

/** Decodes a `Join` body; nothing is validated (see `validateJoin`). */
export function decodeJoin(body: Uint8Array): Result<Join, DecodeFault> {
  return decodeMessage(JoinSchema, "Join", body);
}

/** Decodes an `Ack` body; the status stays a number, known or not. */
export function decodeAck(body: Uint8Array): Result<Ack, DecodeFault> {
  return decodeMessage(AckSchema, "Ack", body);
}

/** Decodes a `Broadcast` body; an unknown kind stays a number (R14). */
export function decodeBroadcast(body: Uint8Array): Result<Broadcast, DecodeFault> {
  return decodeMessage(BroadcastSchema, "Broadcast", body);
}

/** The protobuf body of a `Join`: fields in number order, defaults omitted. */
export function encodeJoin(join: Join): Uint8Array {
  return toBinary(JoinSchema, join);
}

/** The protobuf body of an `Ack`. */
export function encodeAck(ack: Ack): Uint8Array {
  return toBinary(AckSchema, ack);
}

/** The protobuf body of a `Broadcast`. */
export function encodeBroadcast(broadcast: Broadcast): Uint8Array {
  return toBinary(BroadcastSchema, broadcast);
}

/** A `Broadcast` with every field given. */
export function makeBroadcast(fields: {
  readonly soc: Uint8Array;
  readonly kind: Kind | number;
  readonly challenge: Uint8Array;
  readonly index: bigint;
}): Broadcast {
  return create(BroadcastSchema, { ...fields, kind: fields.kind as Kind });
}

/** An `Ack` with every field given. */
export function makeAck(status: Status | number, challenge: Uint8Array = new Uint8Array(0)): Ack {
  return create(AckSchema, { status: status as Status, challenge });
}

/** `Join` as one frame (varint length and body). */
export function joinFrame(join: Join): Uint8Array {
  return encodeFrame(encodeJoin(join));
}

/** `Ack` as one frame. */
export function ackFrame(ack: Ack): Uint8Array {
  return encodeFrame(encodeAck(ack));
}

/** `Broadcast` as one frame: encode once, send the same bytes to every receiver. */
export function broadcastFrame(broadcast: Broadcast): Uint8Array {
  return encodeFrame(encodeBroadcast(broadcast));
}

/** The `.proto` name of a kind value (`DATA`, `AUTH`, ...), or `UNKNOWN(n)`. */
export function kindName(kind: number): string {
  return Kind[kind] ?? `UNKNOWN(${kind})`;
}
