/**
 * bee's published test vectors (docs/PROTOCOL.md §3), the same the Rust tests check in
 * verify/tests/bee_vectors.rs. The hex values are bee's, from ethersphere/bee:
 * - pkg/soc/soc_test.go @4a6969461ec4581bbb8ee0e1451ca8d4c38638b2
 * - pkg/soc/validator_test.go @024e0e6d71ebc10ff8999dab9b2c1e8ec8f1cdcf
 * - pkg/cac/cac_test.go @00c1b5763e3024654aa2e01b47280c86b67908d8
 * - pkg/crypto/signer_test.go @0861b2406c8267e91268db1b2873dfdfd12c226f
 * Only the values are taken from bee; the tests are ours.
 */

import { describe, expect, it } from "vitest";

import {
  CHUNK_SIZE,
  REPLICAS_OWNER,
  SigningKey,
  cacAddress,
  concatBytes,
  fromHex,
  keccak256,
  le64,
  parseSoc,
  recoverAddress,
  recoverSoc,
  signSoc,
  socAddress,
  toHex,
  utf8,
  validateCac,
  validateSoc,
  validateSocAt,
} from "../src/index.js";
import { pattern } from "./fixtures.js";

/** The owner of bee's SOC tests, and the address of bee's signer-test key. */
const OWNER = "8d3766440f0d7b949a5e32995d09619a7f86e632";
/** bee's signer-test secret key (signer_test.go). */
const OWNER_KEY = "634fb5a872396d9693e5c9f9d7233cfa93f395c093371017ff44aa9ae6564cdd";
/** Signature of keccak256(id ‖ cac("foo")) with id = 32 zero bytes, by OWNER. */
const FOO_SIG =
  "5acd384febc133b7b245e5ddc62d82d2cded9182d2716126cd8844509af65a053deb418208027f548e3e88343af6f84a8772fb3cebc0a1833a0ea7ec0c1348311b";
/** SOC address keccak256(0^32 ‖ OWNER). */
const FOO_SOC_ADDRESS = "9d453ebb73b2fedaaf44ceddcf7a0aa37f3e3d6453fea5841c31f0ea6d61dc85";
/** BMT (CAC) address of "foo" with span 3. */
const FOO_CAC_ADDRESS = "2387e8e7d8a48c2a9339c97c1dc3461a9a7aa07e994c5cb8b38fd7c1b3e6ea48";
/** The signed SOC of soc_test.go TestFromChunk and validator_test.go TestValid, as bee lists it. */
// In bee's rows of bytes, to compare with the Go source line by line:
// prettier-ignore
const FOO_SOC_CHUNK = Uint8Array.from([
  ...new Array<number>(32).fill(0),
  90, 205, 56, 79, 235, 193, 51, 183, 178, 69, 229, 221, 198, 45, 130, 210, 205, 237, 145, 130, 210, 113, 97, 38, 205,
  136, 68, 80, 154, 246, 90, 5, 61, 235, 65, 130, 8, 2, 127, 84, 142, 62, 136, 52, 58, 246, 248, 74, 135, 114, 251,
  60, 235, 192, 161, 131, 58, 14, 167, 236, 12, 19, 72, 49, 27, 3, 0, 0, 0, 0, 0, 0, 0, 102, 111, 111,
]);

const ZERO_ID = new Uint8Array(32);
const foo = utf8("foo");
const ownerKey = () => SigningKey.fromSecret(fromHex(OWNER_KEY));

describe("pkg/soc/soc_test.go", () => {
  it("TestNewSigned: the chunk is id ‖ sig ‖ span ‖ payload and recovers the owner", () => {
    const assembled = concatBytes(ZERO_ID, fromHex(FOO_SIG), le64(3n), foo);
    expect(toHex(assembled)).toBe(toHex(FOO_SOC_CHUNK));
    const soc = parseSoc(assembled);
    if (!soc.ok) throw new Error(soc.fault.code);
    expect(toHex(soc.value.signature)).toBe(FOO_SIG);
    expect(toHex(soc.value.payload)).toBe(toHex(foo));
    const recovered = recoverSoc(assembled);
    expect(recovered.ok && toHex(recovered.value.owner)).toBe(OWNER);
  });

  it("TestChunk and TestCreateAddress: the SOC address is keccak256(id ‖ owner)", () => {
    expect(toHex(socAddress(ZERO_ID, fromHex(OWNER)))).toBe(FOO_SOC_ADDRESS);
    expect(validateSocAt(FOO_SOC_CHUNK, fromHex(FOO_SOC_ADDRESS)).ok).toBe(true);
  });

  it("TestSign: a fresh key's signature recovers its address from keccak256(id ‖ cac)", () => {
    const fresh = SigningKey.generate();
    const chunk = signSoc(fresh, ZERO_ID, foo);
    const digest = keccak256(ZERO_ID, cacAddress(le64(3n), foo));
    const recovered = recoverAddress(chunk.subarray(32, 97), digest);
    expect(recovered.ok && toHex(recovered.value)).toBe(toHex(fresh.address));
  });

  it("TestFromChunk: owner, id, wrapped chunk of the published bytes", () => {
    const recovered = recoverSoc(FOO_SOC_CHUNK);
    if (!recovered.ok) throw new Error(recovered.fault.code);
    expect(toHex(recovered.value.owner)).toBe(OWNER);
    expect(toHex(recovered.value.cacAddress)).toBe(FOO_CAC_ADDRESS);
    expect(toHex(recovered.value.address)).toBe(FOO_SOC_ADDRESS);
    expect(validateCac(FOO_SOC_CHUNK.subarray(97), fromHex(FOO_CAC_ADDRESS)).ok).toBe(true);
  });

  it("TestRecoverAddress: FOO_SIG over keccak256(0^32 ‖ cac) recovers OWNER", () => {
    const recovered = recoverAddress(fromHex(FOO_SIG), keccak256(ZERO_ID, fromHex(FOO_CAC_ADDRESS)));
    expect(recovered.ok && toHex(recovered.value)).toBe(OWNER);
  });

  it("signing id 0 / foo with bee's key reproduces bee's chunk exactly (RFC 6979)", () => {
    expect(toHex(ownerKey().address)).toBe(OWNER);
    expect(toHex(signSoc(ownerKey(), ZERO_ID, foo))).toBe(toHex(FOO_SOC_CHUNK));
  });
});

describe("pkg/soc/validator_test.go", () => {
  it("TestValid", () => {
    const valid = validateSocAt(FOO_SOC_CHUNK, fromHex(FOO_SOC_ADDRESS));
    expect(valid.ok && toHex(valid.value.owner)).toBe(OWNER);
  });

  it("TestValidDispersedReplica: the replicas owner signs only ids equal to the CAC in bytes 1..32", () => {
    const replicas = SigningKey.fromSecret(Uint8Array.of(1, ...new Array<number>(31).fill(0)));
    expect(toHex(replicas.address)).toBe(toHex(REPLICAS_OWNER));
    const payload = pattern(CHUNK_SIZE, 7);
    const cac = cacAddress(le64(BigInt(payload.length)), payload);
    const id = cac.slice();
    id[0] = 1;
    expect(validateSocAt(signSoc(replicas, id, payload), socAddress(id, REPLICAS_OWNER)).ok).toBe(true);
    id[2] = (id[2]! + 1) & 0xff;
    const bad = signSoc(replicas, id, payload);
    const verdict = validateSocAt(bad, socAddress(id, REPLICAS_OWNER));
    expect(verdict.ok).toBe(false);
    if (!verdict.ok) expect(verdict.fault.code).toBe("replica-id-mismatch");
    expect(validateSoc(bad).ok).toBe(false);
  });

  it("TestInvalid: every mutation of the valid chunk is rejected", () => {
    const at = fromHex(FOO_SOC_ADDRESS);
    const wrong = at.slice();
    wrong[0] = 255 - wrong[0]!;
    const mismatch = validateSocAt(FOO_SOC_CHUNK, wrong);
    expect(!mismatch.ok && mismatch.fault.code).toBe("address-mismatch");
    for (const position of [32 + 65, 0, 32]) {
      const data = FOO_SOC_CHUNK.slice();
      data[position] = 0x01;
      expect(validateSocAt(data, at).ok, `byte ${position}`).toBe(false);
    }
    expect(validateSocAt(new Uint8Array(0), at)).toEqual({ ok: false, fault: { code: "soc-too-short", length: 0, min: 105 } });
    expect(validateSocAt(utf8("small"), at)).toEqual({ ok: false, fault: { code: "soc-too-short", length: 5, min: 105 } });
    const large = new Uint8Array(CHUNK_SIZE + 8 + 1).fill(0x61);
    expect(validateSocAt(large, at)).toEqual({
      ok: false,
      fault: { code: "soc-signature", fault: { code: "recovery-byte", v: 0x61 } },
    });
    expect(validateSocAt(new Uint8Array(4202).fill(0x61), at)).toEqual({
      ok: false,
      fault: { code: "soc-too-long", length: 4202, max: 4201 },
    });
  });
});

describe("pkg/cac/cac_test.go", () => {
  const greater = utf8("greaterthanspan");

  it("TestNew: greaterthanspan with span 15", () => {
    expect(toHex(cacAddress(le64(15n), greater))).toBe("27913f1bdb6e8e52cbd5a5fd4ab577c857287edf6969b41efe926b51de0f4f23");
  });

  it("TestNewWithDataSpan: the same 15 bytes as span(8) ‖ payload(7)", () => {
    const expected = "95022e6af5c6d6a564ee55a67f8455a3e18c511b5697c932d9e44f07f2fb8c53";
    expect(toHex(cacAddress(greater.subarray(0, 8), greater.subarray(8)))).toBe(expected);
    expect(validateCac(greater, fromHex(expected)).ok).toBe(true);
  });

  it("TestValid and TestInvalid", () => {
    const data = concatBytes(le64(3n), foo);
    expect(validateCac(data, fromHex(FOO_CAC_ADDRESS)).ok).toBe(true);
    const wrong = validateCac(data, fromHex("0000e8e7d8a48c2a9339c97c1dc3461a9a7aa07e994c5cb8b38fd7c1b3e6ea48"));
    expect(!wrong.ok && wrong.fault.code === "cac-address-mismatch" && toHex(wrong.fault.computed)).toBe(FOO_CAC_ADDRESS);
    expect(validateCac(data, new Uint8Array(0)).ok).toBe(false);
    expect(validateCac(new Uint8Array(0), new Uint8Array(0))).toEqual({
      ok: false,
      fault: { code: "cac-too-short", length: 0, min: 8 },
    });
    expect(validateCac(utf8("small"), fromHex("6251dbc53257832ae80d0e9f1cc41bd54d5b6c704c9c7349709c07fefef0aea6")).ok).toBe(false);
    expect(
      validateCac(new Uint8Array(CHUNK_SIZE + 9).fill(0x61), fromHex("ffd70157e48063fc33c97a050f7f640233bf646cc98d9524c6b92bcf3ab56f83")),
    ).toEqual({ ok: false, fault: { code: "cac-too-long", length: 4105, max: 4104 } });
  });
});

describe("pkg/crypto/signer_test.go", () => {
  it("TestDefaultSignerEthereumAddress", () => {
    expect(toHex(ownerKey().address)).toBe(OWNER);
  });

  it("TestDefaultSignerDeterministic: EIP-191 over a fixed digest gives bee's signature", () => {
    const digest = fromHex("2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae");
    const expected =
      "336d24afef78c5883b96ad9a62552a8db3d236105cb059ddd04dc49680869dc16234f6852c277087f025d4114c4fac6b40295ecffd1194a84cdb91bd571769491b";
    const signature = ownerKey().sign(digest);
    expect(toHex(signature)).toBe(expected);
    const recovered = recoverAddress(signature, digest);
    expect(recovered.ok && toHex(recovered.value)).toBe(OWNER);
  });

  it("TestDefaultSigner: recovering against other data gives another address", () => {
    const fresh = SigningKey.generate();
    const data = keccak256(utf8("test string"));
    const signature = fresh.sign(data);
    const right = recoverAddress(signature, data);
    expect(right.ok && toHex(right.value)).toBe(toHex(fresh.address));
    const other = recoverAddress(signature, keccak256(utf8("invalid")));
    expect(other.ok && toHex(other.value)).not.toBe(toHex(fresh.address));
  });
});
