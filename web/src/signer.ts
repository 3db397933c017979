/**
 * secp256k1 keys, EIP-191 signing and owner recovery as bee's `pkg/crypto` does them
 * (docs/PROTOCOL.md §3 "Signing"/"Recovery", D9), on the audited @noble/curves.
 *
 * Owns: `SigningKey` (the only holder of a secret key in the library), `eip191Hash`,
 * `recoverAddress`, `addressOfPublicKey`.
 *
 * Never: lets a secret leave a `SigningKey` except through its explicit `exportSecret()`
 * (not in `toJSON`, `toString` or Node's inspector), hashes a message of a length other
 * than 32 bytes (every BPS signature is over a 32-byte digest, so the EIP-191 prefix is a
 * constant), or throws on a peer's signature (recovery returns a typed fault).
 *
 * Signature layout `r(32) ‖ s(32) ‖ v`: we emit RFC 6979 deterministic nonces, low S and
 * `v = 27 + recovery id` (27/28; 29/30 only if r overflowed the order, probability about
 * 2^-128), which is what bee's btcec `SignCompact` produces. We accept what bee's
 * `RecoverCompact` accepts: v in 27..=34 with recovery id `(v - 27) & 3` (31..34 are
 * btcec's "compressed" flag, irrelevant to the owner), r and s in [1, N-1], and high S
 * (bee does not enforce low S; recovery is the same algebra for either S).
 */

import { secp256k1 } from "@noble/curves/secp256k1.js";

import { equalBytes, toHex, utf8 } from "./bytes.js";
import { BpsError, type Result, fail, ok } from "./errors.js";
import { keccak256 } from "./hash.js";

/** EIP-191 "personal message" prefix for a 32-byte message (bee's `Signer.Sign`). */
export const EIP191_PREFIX: Uint8Array = utf8("\x19Ethereum Signed Message:\n32");
/** Bytes of a signature `r ‖ s ‖ v`. */
export const SIGNATURE_BYTES = 65;
/** Lowest v bee accepts: 27 + recovery id 0. */
export const V_MIN = 27;
/** Highest v bee accepts: 27 + 4 ("compressed") + recovery id 3. */
export const V_MAX = 34;

const CURVE_ORDER = secp256k1.Point.Fn.ORDER;
const SECRET_BYTES = 32;

/** `keccak256(EIP191_PREFIX ‖ data)`: the prehash that is actually signed. */
export function eip191Hash(data: Uint8Array): Uint8Array {
  if (data.length !== 32) throw new RangeError(`eip191Hash: ${data.length}-byte message, expected 32`);
  return keccak256(EIP191_PREFIX, data);
}

/** The address of an uncompressed public key (65 bytes, 0x04 ‖ x ‖ y): keccak256(x ‖ y)[12..]. */
export function addressOfPublicKey(uncompressed: Uint8Array): Uint8Array {
  return keccak256(uncompressed.subarray(1)).slice(12);
}

/** Why 32 bytes are not a usable secret key. */
export type KeyFault =
  { readonly code: "key-length"; readonly bytes: number } | { readonly code: "key-zero" } | { readonly code: "key-out-of-range" };

/** A secret key that cannot be used. */
export class KeyError extends BpsError<KeyFault> {}

function keyError(fault: KeyFault): KeyError {
  const messages: Record<KeyFault["code"], string> = {
    "key-length": "secp256k1 secret key must be 32 bytes",
    "key-zero": "secp256k1 secret key is zero",
    "key-out-of-range": "secp256k1 secret key is not below the curve order",
  };
  return new KeyError(fault, messages[fault.code]);
}

function bigEndian(bytes: Uint8Array): bigint {
  let value = 0n;
  for (const byte of bytes) value = (value << 8n) | BigInt(byte);
  return value;
}

/** A secp256k1 secret key with its address. The secret stays inside (module docs). */
export class SigningKey {
  readonly #secret: Uint8Array;
  /** The owner address: keccak256(public key)[12..]. */
  readonly address: Uint8Array;

  private constructor(secret: Uint8Array) {
    this.#secret = secret;
    this.address = addressOfPublicKey(secp256k1.getPublicKey(secret, false));
    Object.freeze(this);
  }

  /** A fresh key from the CSPRNG (`crypto.getRandomValues`, through noble). */
  static generate(): SigningKey {
    return new SigningKey(secp256k1.utils.randomSecretKey());
  }

  /** A key from its 32 big-endian bytes (copied). Throws `KeyError`. */
  static fromSecret(secret: Uint8Array): SigningKey {
    if (secret.length !== SECRET_BYTES) throw keyError({ code: "key-length", bytes: secret.length });
    const value = bigEndian(secret);
    if (value === 0n) throw keyError({ code: "key-zero" });
    if (value >= CURVE_ORDER) throw keyError({ code: "key-out-of-range" });
    return new SigningKey(secret.slice());
  }

  /** The secret's 32 bytes, a copy: only for a caller that asks to keep or move the key. */
  exportSecret(): Uint8Array {
    return this.#secret.slice();
  }

  /** The uncompressed public key (65 bytes). */
  publicKey(): Uint8Array {
    return secp256k1.getPublicKey(this.#secret, false);
  }

  /**
   * EIP-191 signature over a 32-byte `data` (bee `Signer.Sign`): `r ‖ s ‖ v`, RFC 6979
   * nonce, low S, v = 27 + recovery id.
   */
  sign(data: Uint8Array): Uint8Array {
    const recovered = secp256k1.sign(eip191Hash(data), this.#secret, {
      prehash: false,
      lowS: true,
      format: "recovered",
    });
    // noble's "recovered" layout is recovery ‖ r ‖ s.
    const signature = new Uint8Array(SIGNATURE_BYTES);
    signature.set(recovered.subarray(1, SIGNATURE_BYTES), 0);
    signature[64] = V_MIN + recovered[0]!;
    return signature;
  }

  /** Whether `other` holds the same key (compared by address). */
  equals(other: SigningKey): boolean {
    return equalBytes(this.address, other.address);
  }

  toString(): string {
    return `SigningKey(0x${toHex(this.address)})`;
  }

  toJSON(): { address: string } {
    return { address: toHex(this.address) };
  }

  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.toString();
  }
}

/** Why a 65-byte signature yields no owner. */
export type SignatureFault =
  | { readonly code: "signature-length"; readonly bytes: number }
  | { readonly code: "recovery-byte"; readonly v: number }
  | { readonly code: "scalar-out-of-range"; readonly component: "r" | "s"; readonly value: Uint8Array }
  | { readonly code: "no-public-key"; readonly v: number };

/** Text for a signature fault, as the Rust `SignatureError`'s `Display`. */
export function describeSignatureFault(fault: SignatureFault): string {
  switch (fault.code) {
    case "signature-length":
      return `signature of ${fault.bytes} bytes, expected ${SIGNATURE_BYTES}`;
    case "recovery-byte":
      return `signature v = ${fault.v} is outside ${V_MIN}..=${V_MAX}`;
    case "scalar-out-of-range":
      return `signature ${fault.component} = ${toHex(fault.value)} is not in [1, N-1]`;
    case "no-public-key":
      return `signature with v = ${fault.v} recovers no public key (no curve point for r)`;
  }
}

/** The uncompressed public key that made `signature` over the EIP-191 hash of `data`. */
export function recoverPublicKey(signature: Uint8Array, data: Uint8Array): Result<Uint8Array, SignatureFault> {
  if (signature.length !== SIGNATURE_BYTES) {
    return fail({ code: "signature-length", bytes: signature.length });
  }
  const v = signature[64]!;
  if (v < V_MIN || v > V_MAX) return fail({ code: "recovery-byte", v });
  const scalars: Array<["r" | "s", Uint8Array]> = [
    ["r", signature.slice(0, 32)],
    ["s", signature.slice(32, 64)],
  ];
  for (const [component, value] of scalars) {
    const scalar = bigEndian(value);
    if (scalar === 0n || scalar >= CURVE_ORDER) return fail({ code: "scalar-out-of-range", component, value });
  }
  try {
    const parsed = new secp256k1.Signature(bigEndian(scalars[0]![1]), bigEndian(scalars[1]![1]), (v - V_MIN) & 3);
    return ok(parsed.recoverPublicKey(eip191Hash(data)).toBytes(false));
  } catch {
    // No curve point for r (or r + N for ids 2 and 3), or the identity: as btcec.
    return fail({ code: "no-public-key", v });
  }
}

/** The owner address that made `signature` over the EIP-191 hash of `data` (bee `Recover`). */
export function recoverAddress(signature: Uint8Array, data: Uint8Array): Result<Uint8Array, SignatureFault> {
  const recovered = recoverPublicKey(signature, data);
  return recovered.ok ? ok(addressOfPublicKey(recovered.value)) : recovered;
}
