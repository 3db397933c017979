/**
 * The cohort spec, typed: what a `Join` asks for once it has passed R3, D6 and D7, and its
 * canonical key (R1).
 *
 * Owns: `Spec` and `makeSpec` (a spec the broker is bound to refuse never leaves the
 * client), `authorship`, `checkSpec`, `cohortKey`, `joinFor`, and `validateJoin`, which
 * turns a decoded `Join` into a `ValidJoin` or names the one `RejectReason` it breaks, in
 * the same order and with the same words as the Rust `validate_join`.
 *
 * Never: broker policy. `history` passes here because refusing it is the broker's choice
 * (R3 "MAY", D11); capacity and roles are the broker's. The key is built from the typed
 * spec, never from a peer's bytes, so unknown fields and explicitly encoded defaults cannot
 * split one cohort into two.
 */

import { create, toBinary } from "@bufbuild/protobuf";

import { ADDRESS_BYTES, HASH_BYTES } from "./bytes.js";
import { BpsError, type Result, fail, ok } from "./errors.js";
import { type CohortSpec, CohortSpecSchema, type Join, JoinSchema, PublisherRegime, TopicBinding } from "./gen/bps_pb.js";

/** A binding that is specified (UNSPECIFIED is always rejected, so it has no typed value). */
export type Binding = Exclude<TopicBinding, TopicBinding.TOPIC_BINDING_UNSPECIFIED>;

/** A cohort spec that passed `checkSpec` (R3, D7). Build one with `makeSpec`. */
export interface Spec {
  /** 32 bytes, meaning per binding. */
  readonly topic: Uint8Array;
  /** How the topic relates to the chunks (R11). */
  readonly binding: Binding;
  /** The admin's 20-byte address; absent means implicit authorship. */
  readonly admin?: Uint8Array;
  /** `publishers = ALL` (requires an admin and MNEMONIC, D7). */
  readonly all: boolean;
  /** Ask for retained chunks; part of the cohort's identity (R1), the broker may refuse. */
  readonly history: boolean;
  /** No audience: non-publishers are silent (R9). */
  readonly closed: boolean;
}

/** Who may publish in a cohort. */
export type Authorship = "implicit" | "explicit" | "all";

/** The publishing regime: `all` wins, then an admin makes it explicit. */
export function authorship(spec: Spec): Authorship {
  if (spec.all) return "all";
  return spec.admin === undefined ? "implicit" : "explicit";
}

/** Why a `Join` is answered `REJECTED`: one variant per rule of R3, D6 and D7. */
export type RejectReason =
  | { readonly code: "missing-cohort" }
  | { readonly code: "binding-unspecified" }
  | { readonly code: "binding-unknown"; readonly value: number }
  | { readonly code: "publishers-unknown"; readonly value: number }
  | { readonly code: "topic-length"; readonly bytes: number }
  | { readonly code: "admin-length"; readonly bytes: number }
  | { readonly code: "addr-length"; readonly bytes: number }
  | { readonly code: "closed-with-all" }
  | { readonly code: "closed-implicit" }
  | { readonly code: "all-without-admin" }
  | { readonly code: "all-without-mnemonic"; readonly binding: Binding };

/** The name of a binding as in the `.proto` (`FEED_TOPIC`, ...). */
export function bindingName(binding: number): string {
  return TopicBinding[binding] ?? `UNKNOWN(${binding})`;
}

/** The reason as a sentence, word for word the Rust `RejectReason`'s `Display`. */
export function describeReject(reason: RejectReason): string {
  switch (reason.code) {
    case "missing-cohort":
      return "Join has no cohort spec";
    case "binding-unspecified":
      return "cohort binding is TOPIC_BINDING_UNSPECIFIED";
    case "binding-unknown":
      return `cohort binding ${reason.value} is not a known TopicBinding`;
    case "publishers-unknown":
      return `cohort publishers ${reason.value} is not a known PublisherRegime`;
    case "topic-length":
      return `cohort topic is ${reason.bytes} bytes, expected ${HASH_BYTES}`;
    case "admin-length":
      return `cohort admin is ${reason.bytes} bytes, expected ${ADDRESS_BYTES} or absent`;
    case "addr-length":
      return reason.bytes === 0
        ? `Join addr is missing (required, ${ADDRESS_BYTES} bytes)`
        : `Join addr is ${reason.bytes} bytes, expected ${ADDRESS_BYTES}`;
    case "closed-with-all":
      return "closed is not allowed with publishers ALL";
    case "closed-implicit":
      return "closed is not allowed under implicit authorship (no admin)";
    case "all-without-admin":
      return "publishers ALL requires an admin";
    case "all-without-mnemonic":
      return `publishers ALL requires binding MNEMONIC, not ${bindingName(reason.binding)}`;
  }
}

/** A spec the caller built breaks a rule the broker would answer with REJECTED. */
export class SpecError extends BpsError<RejectReason> {}

/** The field sizes (which the type cannot express) and the combination rules of R3, D7. */
export function checkSpec(spec: Spec): RejectReason | undefined {
  if (spec.topic.length !== HASH_BYTES) return { code: "topic-length", bytes: spec.topic.length };
  if (spec.admin !== undefined && spec.admin.length !== ADDRESS_BYTES) {
    return { code: "admin-length", bytes: spec.admin.length };
  }
  if (spec.all && spec.admin === undefined) return { code: "all-without-admin" };
  if (spec.all && spec.binding !== TopicBinding.MNEMONIC) {
    return { code: "all-without-mnemonic", binding: spec.binding };
  }
  if (spec.closed && spec.all) return { code: "closed-with-all" };
  if (spec.closed && spec.admin === undefined) return { code: "closed-implicit" };
  return undefined;
}

/** What `makeSpec` takes: the flags default to false, `admin` to absent. */
export interface SpecInit {
  readonly topic: Uint8Array;
  readonly binding: Binding;
  readonly admin?: Uint8Array | undefined;
  readonly all?: boolean;
  readonly history?: boolean;
  readonly closed?: boolean;
}

/** A frozen, checked spec with copies of the given bytes. Throws `SpecError`. */
export function makeSpec(init: SpecInit): Spec {
  const spec: Spec = {
    topic: init.topic.slice(),
    binding: init.binding,
    ...(init.admin === undefined ? {} : { admin: init.admin.slice() }),
    all: init.all ?? false,
    history: init.history ?? false,
    closed: init.closed ?? false,
  };
  const reason = checkSpec(spec);
  if (reason !== undefined) throw new SpecError(reason, describeReject(reason));
  return Object.freeze(spec);
}

/** The wire form of a spec, every default field left at its default. */
export function specToPb(spec: Spec): CohortSpec {
  return create(CohortSpecSchema, {
    topic: spec.topic,
    binding: spec.binding,
    admin: spec.admin ?? new Uint8Array(0),
    publishers: spec.all ? PublisherRegime.ALL : PublisherRegime.PUBLISHER_REGIME_UNSPECIFIED,
    history: spec.history,
    closed: spec.closed,
  });
}

/** A `Join` for `spec` declaring `addr` as the stream's identity. */
export function joinFor(spec: Spec, addr: Uint8Array): Join {
  return create(JoinSchema, { cohort: specToPb(spec), addr });
}

/**
 * The cohort's identity (R1): the protobuf encoding of the typed spec, fields in number
 * order, defaults omitted: `0A 20 <topic> 10 <binding> [1A 14 <admin>] [20 01] [28 01]
 * [30 01]`.
 */
export function cohortKey(spec: Spec): Uint8Array {
  return toBinary(CohortSpecSchema, specToPb(spec));
}

/** A `Join` that passed R3, D6 and D7. */
export interface ValidJoin {
  readonly spec: Spec;
  readonly addr: Uint8Array;
  /** `cohortKey(spec)`. */
  readonly key: Uint8Array;
}

function isKnown(enumObject: object, value: number): boolean {
  return Object.values(enumObject).includes(value);
}

/**
 * Checks a decoded `Join` against R3, D6 and D7. The first broken rule is reported, in the
 * Rust order: cohort, binding, publishers, topic, admin, addr, then the combinations.
 */
export function validateJoin(join: Join): Result<ValidJoin, RejectReason> {
  const cohort = join.cohort;
  if (cohort === undefined) return fail({ code: "missing-cohort" });
  if (!isKnown(TopicBinding, cohort.binding)) {
    return fail({ code: "binding-unknown", value: cohort.binding });
  }
  if (cohort.binding === TopicBinding.TOPIC_BINDING_UNSPECIFIED) {
    return fail({ code: "binding-unspecified" });
  }
  // PUBLISHER_REGIME_UNSPECIFIED is the proto3 default, i.e. "unset", which is allowed.
  if (!isKnown(PublisherRegime, cohort.publishers)) {
    return fail({ code: "publishers-unknown", value: cohort.publishers });
  }
  if (cohort.topic.length !== HASH_BYTES) {
    return fail({ code: "topic-length", bytes: cohort.topic.length });
  }
  if (cohort.admin.length !== 0 && cohort.admin.length !== ADDRESS_BYTES) {
    return fail({ code: "admin-length", bytes: cohort.admin.length });
  }
  if (join.addr.length !== ADDRESS_BYTES) return fail({ code: "addr-length", bytes: join.addr.length });
  const spec: Spec = {
    topic: cohort.topic.slice(),
    binding: cohort.binding,
    ...(cohort.admin.length === 0 ? {} : { admin: cohort.admin.slice() }),
    all: cohort.publishers === PublisherRegime.ALL,
    history: cohort.history,
    closed: cohort.closed,
  };
  const reason = checkSpec(spec);
  if (reason !== undefined) return fail(reason);
  return ok({ spec: Object.freeze(spec), addr: join.addr.slice(), key: cohortKey(spec) });
}
