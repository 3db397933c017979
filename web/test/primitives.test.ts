import { keccak_256 } from "@noble/hashes/sha3.js";
import { secp256k1 } from "@noble/curves/secp256k1.js";
import { inspect } from "node:util";
import { describe, expect, it } from "vitest";

import {
  CHUNK_SIZE,
  KeyError,
  Kind,
  MAX_PO,
  PO_MIN,
  PayloadError,
  SERVICE_PREFIX,
  SigningKey,
  TopicBinding,
  be64,
  bmtRoot,
  cacAddress,
  checkImplicit,
  concatBytes,
  decodeRoster,
  encodeRoster,
  feedId,
  fromHex,
  keccak256,
  knownKind,
  le64,
  proximity,
  recoverAddress,
  sessionChunkId,
  sessionTopic,
  signSoc,
  socAddress,
  toHex,
  utf8,
  validateSoc,
  validateSocAt,
} from "../src/index.js";
import { pattern } from "./fixtures.js";

/** Raw keccak straight from noble over the joined parts, independent of `keccak256`. */
const raw = (...parts: Uint8Array[]) => keccak_256(concatBytes(...parts));

/** The obvious recursive BMT over the zero-padded 4096 bytes, to check the shortcut against. */
function referenceRoot(payload: Uint8Array): Uint8Array {
  const node = (data: Uint8Array): Uint8Array =>
    data.length === 64 ? raw(data) : raw(node(data.subarray(0, data.length / 2)), node(data.subarray(data.length / 2)));
  const padded = new Uint8Array(CHUNK_SIZE);
  padded.set(payload);
  return node(padded);
}

describe("BMT", () => {
  it("matches the straightforward reference for many lengths", () => {
    const data = pattern(CHUNK_SIZE);
    const lengths = new Set([0, 1, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000, 2047, 2048, 2049, 4064, 4095, 4096]);
    for (let length = 0; length <= CHUNK_SIZE; length += 97) lengths.add(length);
    for (const length of lengths) {
      expect(toHex(bmtRoot(data.subarray(0, length))), `length ${length}`).toBe(toHex(referenceRoot(data.subarray(0, length))));
    }
  });

  it("treats trailing zeros as padding, as bee does, and refuses more than a chunk", () => {
    expect(toHex(bmtRoot(new Uint8Array(0)))).toBe(toHex(bmtRoot(new Uint8Array(CHUNK_SIZE))));
    expect(toHex(bmtRoot(new Uint8Array(5)))).toBe(toHex(bmtRoot(new Uint8Array(0))));
    expect(() => bmtRoot(new Uint8Array(CHUNK_SIZE + 1))).toThrow(RangeError);
  });

  it("puts the span in front of the root, taken as given", () => {
    const payload = utf8("foo");
    expect(toHex(cacAddress(le64(3n), payload))).toBe(toHex(raw(le64(3n), bmtRoot(payload))));
    expect(toHex(cacAddress(le64(99n), payload))).not.toBe(toHex(cacAddress(le64(3n), payload)));
  });
});

describe("signing", () => {
  const digests = Array.from({ length: 64 }, (_, index) => keccak256(be64(BigInt(index))));

  it("is deterministic (RFC 6979), low-S, with v = 27 or 28, and recovers the signer", () => {
    const signer = SigningKey.fromSecret(new Uint8Array(32).fill(7));
    const half = secp256k1.Point.Fn.ORDER >> 1n;
    const vs = new Set<number>();
    for (const digest of digests) {
      const signature = signer.sign(digest);
      expect(toHex(signer.sign(digest))).toBe(toHex(signature));
      expect(BigInt(`0x${toHex(signature.subarray(32, 64))}`) <= half).toBe(true);
      vs.add(signature[64]!);
      const recovered = recoverAddress(signature, digest);
      expect(recovered.ok && toHex(recovered.value)).toBe(toHex(signer.address));
    }
    expect([...vs].sort()).toEqual([27, 28]);
    // Another key signs the same digest differently.
    const other = SigningKey.fromSecret(new Uint8Array(32).fill(8));
    expect(toHex(other.sign(digests[0]!))).not.toBe(toHex(signer.sign(digests[0]!)));
  });

  it("accepts v 27..34 as bee does, high S, and refuses the rest with typed faults", () => {
    const signer = SigningKey.fromSecret(new Uint8Array(32).fill(9));
    const digest = digests[1]!;
    const signature = signer.sign(digest);
    const owner = toHex(signer.address);
    const withV = (v: number) => Uint8Array.of(...signature.subarray(0, 64), v);
    // 31..34 are btcec's "compressed" flag on top of the same recovery id.
    const compressed = recoverAddress(withV(signature[64]! + 4), digest);
    expect(compressed.ok && toHex(compressed.value)).toBe(owner);
    for (const v of [0, 1, 26, 35, 255]) {
      expect(recoverAddress(withV(v), digest)).toEqual({ ok: false, fault: { code: "recovery-byte", v } });
    }
    // (r, N - s) with the parity flipped is the same signer: bee does not enforce low S.
    const order = secp256k1.Point.Fn.ORDER;
    const s = BigInt(`0x${toHex(signature.subarray(32, 64))}`);
    const highS = fromHex((order - s).toString(16).padStart(64, "0"));
    const flipped = Uint8Array.of(...signature.subarray(0, 32), ...highS, signature[64] === 27 ? 28 : 27);
    const high = recoverAddress(flipped, digest);
    expect(high.ok && toHex(high.value)).toBe(owner);
    // r or s of zero or not below N.
    const zeroR = Uint8Array.of(...new Array<number>(32).fill(0), ...signature.subarray(32));
    expect(recoverAddress(zeroR, digest)).toMatchObject({ ok: false, fault: { code: "scalar-out-of-range", component: "r" } });
    const bigS = Uint8Array.of(...signature.subarray(0, 32), ...new Array<number>(32).fill(0xff), 27);
    expect(recoverAddress(bigS, digest)).toMatchObject({ ok: false, fault: { code: "scalar-out-of-range", component: "s" } });
    // Recovery ids 2 and 3 mean x = r + N, which needs r + N < P: r = 2^200 is a valid
    // scalar, but r + N is beyond the field, so no point exists.
    const bigR = fromHex((1n << 200n).toString(16).padStart(64, "0"));
    const noPoint = Uint8Array.of(...bigR, ...signature.subarray(32, 64), 29);
    expect(recoverAddress(noPoint, digest)).toEqual({ ok: false, fault: { code: "no-public-key", v: 29 } });
  });

  it("refuses unusable keys and never shows the secret", () => {
    expect(() => SigningKey.fromSecret(new Uint8Array(32))).toThrow(KeyError);
    expect(() => SigningKey.fromSecret(new Uint8Array(32).fill(0xff))).toThrow(KeyError);
    expect(() => SigningKey.fromSecret(new Uint8Array(31).fill(1))).toThrow(KeyError);
    const secret = new Uint8Array(32).fill(0x11);
    const signer = SigningKey.fromSecret(secret);
    const secretHex = toHex(secret);
    for (const shown of [JSON.stringify(signer), String(signer), inspect(signer, { showHidden: true, depth: 5 })]) {
      expect(shown).not.toContain(secretHex);
      expect(shown).toContain(toHex(signer.address));
    }
    expect(toHex(signer.exportSecret())).toBe(secretHex);
    secret.fill(0x22);
    expect(toHex(signer.exportSecret()), "the key keeps its own copy").toBe(secretHex);
    expect(SigningKey.generate().equals(SigningKey.generate())).toBe(false);
  });

  it("signs a SOC whose span defaults to the payload length and refuses an oversize payload", () => {
    const signer = SigningKey.fromSecret(new Uint8Array(32).fill(3));
    const id = keccak256(utf8("id"));
    const chunk = signSoc(signer, id, utf8("hello"));
    expect(toHex(chunk.subarray(97, 105))).toBe(toHex(le64(5n)));
    const valid = validateSocAt(chunk, socAddress(id, signer.address));
    expect(valid.ok && toHex(valid.value.owner)).toBe(toHex(signer.address));
    const spanned = signSoc(signer, id, utf8("hello"), 4096n);
    expect(toHex(spanned.subarray(97, 105))).toBe(toHex(le64(4096n)));
    expect(validateSoc(spanned).ok).toBe(true);
    expect(() => signSoc(signer, id, new Uint8Array(CHUNK_SIZE + 1))).toThrow(PayloadError);
    expect(signSoc(signer, id, new Uint8Array(CHUNK_SIZE)).length).toBe(4201);
  });
});

describe("chunk ids", () => {
  const topic = new Uint8Array(32).fill(0x11);
  const challenge = new Uint8Array(32).fill(0x22);
  const owner = new Uint8Array(20).fill(0x33);
  const index = 0x0102030405060708n;

  it("derives every kind's id from kind, topic, challenge and index", () => {
    const cases: Array<[Kind.DATA | Kind.AUTH | Kind.ROSTER | Kind.EOS, Uint8Array]> = [
      [Kind.DATA, new Uint8Array(0)],
      [Kind.AUTH, concatBytes(utf8("bps-service:v1"), Uint8Array.of(2))],
      [Kind.ROSTER, concatBytes(utf8("bps-service:v1"), Uint8Array.of(3))],
      [Kind.EOS, concatBytes(utf8("bps-service:v1"), Uint8Array.of(4))],
    ];
    const ids = new Set<string>();
    for (const [kind, prefix] of cases) {
      const topicS = raw(prefix, topic, challenge);
      expect(toHex(sessionTopic(kind, topic, challenge))).toBe(toHex(topicS));
      const id = raw(topicS, Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8));
      expect(toHex(sessionChunkId(kind, topic, challenge, index))).toBe(toHex(id));
      expect(toHex(socAddress(id, owner))).toBe(toHex(raw(id, owner)));
      ids.add(toHex(id));
    }
    expect(ids.size, "each kind is its own feed").toBe(4);
    expect(toHex(SERVICE_PREFIX)).toBe(toHex(utf8("bps-service:v1")));
  });

  it("feed ids are topic then big-endian index", () => {
    expect(toHex(feedId(topic, 256n))).toBe(toHex(raw(topic, Uint8Array.of(0, 0, 0, 0, 0, 0, 1, 0))));
    expect(toHex(feedId(topic, (1n << 64n) - 1n))).toBe(toHex(raw(topic, new Uint8Array(8).fill(0xff))));
    expect(() => feedId(topic, 1n << 64n)).toThrow(RangeError);
  });

  it("knows only the specified kinds", () => {
    expect([0, 1, 2, 3, 4, 5, -1, 99].map(knownKind)).toEqual([undefined, 1, 2, 3, 4, undefined, undefined, undefined]);
  });
});

describe("proximity and implicit shapes", () => {
  it("matches bee's definition", () => {
    const zero = new Uint8Array(32);
    const with_ = (position: number, byte: number) => {
      const bytes = new Uint8Array(32);
      bytes[position] = byte;
      return bytes;
    };
    expect(proximity(zero, zero)).toBe(MAX_PO);
    expect(proximity(zero, with_(0, 0x80))).toBe(0);
    expect(proximity(zero, with_(0, 0x01))).toBe(7);
    expect(proximity(zero, with_(2, 0x40))).toBe(17);
    expect(proximity(zero, with_(3, 0x01))).toBe(31);
    expect(proximity(zero, with_(4, 0xff))).toBe(MAX_PO);
    expect(proximity(Uint8Array.of(0), Uint8Array.of(0, 0xff))).toBe(MAX_PO);
  });

  it("checks each binding's shape and names the dedup key", () => {
    const signer = SigningKey.fromSecret(new Uint8Array(32).fill(5));
    const recovered = (id: Uint8Array, payload = utf8("x")) => {
      const valid = validateSoc(signSoc(signer, id, payload));
      if (!valid.ok) throw new Error(valid.fault.code);
      return valid.value;
    };
    const topic = new Uint8Array(32).fill(0x42);
    const soc = recovered(feedId(topic, 3n));
    expect(checkImplicit(TopicBinding.MNEMONIC, topic, 0n, soc)).toEqual({ ok: true, value: soc.address });
    expect(checkImplicit(TopicBinding.FEED_TOPIC, topic, 3n, soc)).toEqual({ ok: true, value: soc.address });
    expect(checkImplicit(TopicBinding.FEED_TOPIC, topic, 4n, soc)).toMatchObject({
      ok: false,
      fault: { code: "feed-id-mismatch", index: 4n },
    });
    const gsoc = recovered(topic);
    expect(checkImplicit(TopicBinding.ANCHOR, gsoc.address, 0n, gsoc)).toEqual({ ok: true, value: gsoc.cacAddress });
    expect(checkImplicit(TopicBinding.ANCHOR, topic, 0n, gsoc)).toMatchObject({ ok: false, fault: { code: "address-not-topic" } });
    expect(checkImplicit(TopicBinding.SOC_ID, keccak256(topic), 0n, gsoc)).toMatchObject({ ok: false, fault: { code: "id-not-topic" } });
    expect(checkImplicit(TopicBinding.OWNER, topic, 0n, soc)).toMatchObject({ ok: false, fault: { code: "owner-not-topic" } });
    const ownerTopic = keccak256(signer.address);
    const far = proximity(soc.address, ownerTopic) < PO_MIN;
    if (far) {
      expect(checkImplicit(TopicBinding.OWNER, ownerTopic, 0n, soc)).toMatchObject({
        ok: false,
        fault: { code: "proximity-too-low", min: PO_MIN },
      });
    }
  });
});

describe("roster payload", () => {
  it("round-trips in order with duplicates, and is the hand-worked protobuf", () => {
    const publishers = [new Uint8Array(20).fill(0xaa), new Uint8Array(20).fill(0xbb), new Uint8Array(20).fill(0xaa)];
    expect(toHex(encodeRoster(publishers.slice(0, 2)))).toBe(`0a14${"aa".repeat(20)}0a14${"bb".repeat(20)}`);
    const decoded = decodeRoster(encodeRoster(publishers));
    expect(decoded.ok && decoded.value.map(toHex)).toEqual(publishers.map(toHex));
    expect(encodeRoster([]).length).toBe(0);
  });

  it("refuses entries that are not 20 bytes, with their position, and malformed protobuf", () => {
    for (const bytes of [0, 19, 21]) {
      const payload = concatBytes(fromHex(`0a14${"01".repeat(20)}`), Uint8Array.of(0x0a, bytes), new Uint8Array(bytes).fill(2));
      expect(decodeRoster(payload)).toEqual({ ok: false, fault: { code: "roster-entry-length", index: 1, bytes } });
    }
    expect(decodeRoster(Uint8Array.of(0x0a, 0x14, 0x01, 0x02))).toMatchObject({ ok: false, fault: { code: "roster-malformed" } });
  });
});
