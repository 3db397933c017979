/**
 * The verification worker's entry (bundled by `build.mjs` as `verifyWorker.js`): one
 * dedicated Web Worker per page answers each message the page forwards with
 * `checkMessage`, in the order they came, so the signature checks of a flood never run on
 * the page's own thread.
 *
 * Owns: the worker's message binding. Never: holds a key, a socket or cohort state.
 */

import { type VerifyRequest, checkMessage } from "./verifyCheck.js";

self.addEventListener("message", (event: MessageEvent<VerifyRequest>) => {
  self.postMessage(checkMessage(event.data, Date.now()));
});
