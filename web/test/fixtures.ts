/**
 * Shared test fixtures: deterministic keys, a fixed topic, spec builders and small helpers
 * to pull verdicts apart. Tests only; nothing here is part of the library.
 */

import { expect } from "vitest";

import {
  type Binding,
  type Broadcast,
  type DropReason,
  Kind,
  Outbox,
  type OutboxOptions,
  type Outgoing,
  PO_MIN,
  type Publication,
  SigningKey,
  type Spec,
  type Verdict,
  be64,
  keccak256,
  makeSpec,
  proximity,
  socAddress,
} from "../src/index.js";

/** The topic most tests use. */
export const TOPIC = new Uint8Array(32).fill(0x42);

/** A key whose secret is 32 copies of `byte` (valid for 1..=0xfe). */
export function key(byte: number): SigningKey {
  return SigningKey.fromSecret(new Uint8Array(32).fill(byte));
}

/** A spec over `TOPIC`. */
export function spec(
  admin: SigningKey | undefined,
  binding: Binding,
  options: { all?: boolean; closed?: boolean; history?: boolean } = {},
): Spec {
  return makeSpec({ topic: TOPIC, binding, admin: admin?.address, ...options });
}

/** The reason of a dropped verdict (fails the test otherwise). */
export function reason(verdict: Verdict): DropReason {
  expect(verdict.type).toBe("dropped");
  if (verdict.type !== "dropped") throw new Error("not dropped");
  return verdict.reason;
}

/** `count` bytes, each `(position * 7 + 3) mod 256`, so no two nearby lengths look alike. */
export function pattern(count: number, seed = 3): Uint8Array {
  return Uint8Array.from({ length: count }, (_, position) => (position * 7 + seed) & 0xff);
}

/** Every frame an outbox writes now, as if each write succeeded. */
export function written(outbox: Outbox): Outgoing[] {
  const frames: Outgoing[] = [];
  for (let outgoing = outbox.nextFrame(); outgoing !== undefined; outgoing = outbox.nextFrame()) {
    outbox.markSent();
    frames.push(outgoing);
  }
  return frames;
}

/** What a broker would deliver of an outbox's writes on a stream with `challenge` (AUTH never is). */
export function delivered(outbox: Outbox, challenge: Uint8Array): Broadcast[] {
  outbox.beginSession(challenge);
  return written(outbox)
    .filter((outgoing) => outgoing.kind !== Kind.AUTH)
    .map((outgoing) => outgoing.signed.broadcast);
}

/** A 32-byte value of one repeated byte (challenges, ids). */
export function filled(byte: number, length = 32): Uint8Array {
  return new Uint8Array(length).fill(byte);
}

/** An outbox for `signer` in `cohort`. */
export function outbox(cohort: Spec, signer: SigningKey, options: OutboxOptions = {}): Outbox {
  return new Outbox(cohort, signer, options);
}

let nextIndex = 0n;
/** A DATA publication with a fresh index from a counter (tests that care pass their own). */
export function data(payload: Uint8Array, index: bigint = nextIndex++): Publication {
  return { kind: Kind.DATA, index, payload };
}

/** What `run` throws; fails the test when it returns instead. */
export function thrownBy(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error("expected a throw, and nothing was thrown");
}

/** A topic for implicit SOC_ID that `owner` fits: PO(keccak256(topic ‖ owner), topic) >= 16. */
export function socIdTopicFor(owner: Uint8Array): Uint8Array {
  for (let nonce = 0n; ; nonce++) {
    const topic = keccak256(be64(nonce));
    if (proximity(socAddress(topic, owner), topic) >= PO_MIN) return topic;
  }
}
