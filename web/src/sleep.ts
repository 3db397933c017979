/**
 * Waiting, the one use of a clock in the library (backoff delays, the handshake deadline,
 * a full send buffer), behind a function type so tests replace it and never wait.
 *
 * Owns: `Sleep` and `timerSleep`.
 *
 * Never: rejects: an abort ends the wait early and the caller checks why it woke.
 */

/** Waits `ms`, or less if `signal` aborts; never rejects. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

/** `setTimeout`-based sleep that ends early on abort. */
export const timerSleep: Sleep = (ms, signal) =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
