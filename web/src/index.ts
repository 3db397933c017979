/**
 * @bps/client: the browser and Node client of Swarm's Broadcast Pub/Sub as this appliance
 * speaks it (docs/PROTOCOL.md). Everything public is re-exported here; see README.md.
 *
 * Owns: the public surface. Never: code of its own.
 */

export { Admission, CURSORS_MAX_DEFAULT, DEDUP_WINDOW_CHUNKS_DEFAULT } from "./admission.js";
export type {
  AdmissionOptions,
  AdmissionSnapshot,
  DataVerdict,
  DropReason,
  IndexGap,
  NextUpdate,
  RosterVerdict,
  SnapshotFault,
  Verdict,
} from "./admission.js";
export { BACKOFF_MAX_MS, BACKOFF_MIN_MS, Backoff, cryptoRandomInt } from "./backoff.js";
export type { RandomInt } from "./backoff.js";
export { BRANCHES, CHUNK_SIZE, SEGMENT_SIZE, SPAN_SIZE, bmtRoot, cacAddress, cacAddressOf, validateCac } from "./bmt.js";
export type { CacFault } from "./bmt.js";
export { ADDRESS_BYTES, HASH_BYTES, HexError, U64_MAX, be64, concatBytes, equalBytes, fromHex, le64, toHex, utf8 } from "./bytes.js";
export type { HexFault } from "./bytes.js";
export { SERVICE_PREFIX, feedId, knownKind, sessionChunkId, sessionTopic, socAddress } from "./chunkId.js";
export type { KnownKind } from "./chunkId.js";
export type { EvictedCursor } from "./cursorTable.js";
export { BpsError, fail, ok } from "./errors.js";
export type { Fault, Result } from "./errors.js";
export {
  BROADCAST_FRAME_BYTES_MAX,
  FRAME_BYTES_MAX_DEFAULT,
  FrameReader,
  SOC_BYTES_MAX,
  decodeFrameMessage,
  describeFrameFault,
  encodeFrame,
  peekFrame,
} from "./frame.js";
export type { FrameFault, FrameHeader, FrameMessageFault } from "./frame.js";
export { keccak256 } from "./hash.js";
export { IndexSequences, SequenceError, wallClockIndex } from "./indexSequences.js";
export type { SequenceFault, SequencedKind } from "./indexSequences.js";
export { memoryTransport } from "./memoryTransport.js";
export type { MemoryPeer } from "./memoryTransport.js";
export { Outbox, PublishError, PublisherError, QUEUED_PUBLICATIONS_MAX_DEFAULT, describePublishFault, mineOwnerId } from "./outbox.js";
export type { Outgoing, OutboxOptions, Publication, PublishFault, PublisherFault, Role } from "./outbox.js";
export { Publisher, SEND_BUFFER_BYTES_MAX_DEFAULT } from "./publisher.js";
export type { PublisherEnd, PublisherEvent, PublisherOptions } from "./publisher.js";
export {
  BROKER_NAME_BYTES_MAX,
  PLACEMENT_TAG,
  PlacementError,
  brokerName,
  brokerNames,
  describePlacementFault,
  placementWeight,
  rankBrokers,
} from "./placement.js";
export type { PlacementFault } from "./placement.js";
export { brokerList } from "./reconnect.js";
export type { BrokerList } from "./reconnect.js";
export { decodeRoster, describeRosterFault, encodeRoster } from "./roster.js";
export type { RosterFault } from "./roster.js";
export { EARLY_FRAMES_MAX, HANDSHAKE_TIMEOUT_MS_DEFAULT, Session, SessionError, describeSessionFault } from "./session.js";
export type { JoinOutcome, SessionFault, SessionHandlers, SessionOptions } from "./session.js";
export { MAX_PO, PO_MIN, checkImplicit, describeShapeFault, proximity } from "./shape.js";
export type { ShapeFault } from "./shape.js";
export { signBroadcast, signImplicit } from "./signed.js";
export type { SignedFrame } from "./signed.js";
export {
  EIP191_PREFIX,
  KeyError,
  SIGNATURE_BYTES,
  SigningKey,
  V_MAX,
  V_MIN,
  addressOfPublicKey,
  describeSignatureFault,
  eip191Hash,
  recoverAddress,
  recoverPublicKey,
} from "./signer.js";
export type { KeyFault, SignatureFault } from "./signer.js";
export { timerSleep } from "./sleep.js";
export type { Sleep } from "./sleep.js";
export {
  PayloadError,
  REPLICAS_OWNER,
  SOC_MAX_CHUNK_SIZE,
  SOC_MIN_CHUNK_SIZE,
  describeSocFault,
  parseSoc,
  recoverSoc,
  signSoc,
  signingDigest,
  spanValue,
  validateSoc,
  validateSocAt,
} from "./soc.js";
export type { PayloadTooLarge, Recovered, SocFault, SocValidator, SocView } from "./soc.js";
export {
  SpecError,
  authorship,
  bindingName,
  checkSpec,
  cohortKey,
  describeReject,
  joinFor,
  makeSpec,
  specToPb,
  validateJoin,
} from "./spec.js";
export type { Authorship, Binding, RejectReason, Spec, SpecInit, ValidJoin } from "./spec.js";
export { Subscriber } from "./subscriber.js";
export type { SubscriberEnd, SubscriberEvent, SubscriberOptions } from "./subscriber.js";
export { MemoryStore, STORE_PREFIX, localStorageStore, storeKey } from "./store.js";
export type { MaybePromise, Store, WebStorageLike } from "./store.js";
export { TransportError, describeTransportFault } from "./transport.js";
export type { Link, LinkHandlers, Transport, TransportFault } from "./transport.js";
export { CONNECT_TIMEOUT_MS_DEFAULT, NATIVE_PATH, NATIVE_PORT, nativeEndpoint, webSocketBrokers, webSocketTransport } from "./websocket.js";
export type { WebSocketConstructor, WebSocketLike, WebSocketTransportOptions } from "./websocket.js";
export {
  AckSchema,
  BroadcastSchema,
  CohortSpecSchema,
  JoinSchema,
  Kind,
  PublisherRegime,
  RosterSchema,
  Status,
  TopicBinding,
  ackFrame,
  broadcastFrame,
  decodeAck,
  decodeBroadcast,
  decodeJoin,
  describeDecodeFault,
  encodeAck,
  encodeBroadcast,
  encodeJoin,
  joinFrame,
  kindName,
  makeAck,
  makeBroadcast,
} from "./wire.js";
export type { Ack, Broadcast, CohortSpec, DecodeFault, FrameType, Join, Roster } from "./wire.js";
