/**
 * This tab's signing key: generated in the browser on first use and kept in localStorage
 * under `bps-demo/key/<identity>`, so a reload keeps the same address.
 *
 * Owns: `loadIdentity`. Never: puts the secret anywhere but that one localStorage entry
 * (no URL, no message, no log); the key object itself shows only its address.
 */

import { SigningKey, fromHex, toHex } from "../../src/index.js";

const KEY_PREFIX = "bps-demo/key/";

/** The stored key of `identity`, or a fresh one, stored first. */
export function loadIdentity(storage: Storage, identity: string): SigningKey {
  const slot = KEY_PREFIX + identity;
  const stored = storage.getItem(slot);
  if (stored !== null) {
    try {
      return SigningKey.fromSecret(fromHex(stored));
    } catch {
      // A damaged entry is replaced below: this key only ever lived in this browser.
    }
  }
  const key = SigningKey.generate();
  storage.setItem(slot, toHex(key.exportSecret()));
  return key;
}
