/**
 * Shared test fixtures: deterministic keys, a fixed topic, spec builders and small helpers
 * to pull verdicts apart. Tests only; nothing here is part of the library.
 */

import { expect } from "vitest";

import { type Binding, type DropReason, SigningKey, type Spec, type Verdict, makeSpec } from "../src/index.js";

/** The topic most tests use. */
export const TOPIC = new Uint8Array(32).fill(0x42);

/** A key whose secret is 32 copies of `byte` (valid for 1..=0xfe). */
export function key(byte: number): SigningKey {
  return SigningKey.fromSecret(new Uint8Array(32).fill(byte));
}

/** A spec over `TOPIC`. */
export function spec(admin: SigningKey | undefined, binding: Binding, options: { all?: boolean; closed?: boolean; history?: boolean } = {}): Spec {
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
