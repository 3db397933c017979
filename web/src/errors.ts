/**
 * The one error shape of the library: every thrown error is a `BpsError` subclass carrying
 * a typed `fault` (a discriminated union with a `code`), so callers switch on data, not on
 * message text.
 *
 * Owns: `BpsError`, `Fault`, `Result`, `ok`, `fail`.
 *
 * Never: decides what is a fault (each module defines its own union), or is used for a
 * peer's bad frame on the receiving path: those are returned as values (`Result`) or
 * reported as drops, never thrown at the caller.
 */

/** Every fault names itself with a stable `code`. */
export interface Fault {
  readonly code: string;
}

/** A thrown error with its typed cause. */
export class BpsError<F extends Fault = Fault> extends Error {
  readonly fault: F;

  constructor(fault: F, message: string) {
    super(message);
    this.fault = fault;
    this.name = new.target.name;
  }
}

/** The outcome of a check on peer bytes: a value, or the typed reason it failed. */
export type Result<T, F extends Fault> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly fault: F };

/** A successful `Result`. */
export function ok<T>(value: T): { readonly ok: true; readonly value: T } {
  return { ok: true, value };
}

/** A failed `Result`. */
export function fail<F extends Fault>(fault: F): { readonly ok: false; readonly fault: F } {
  return { ok: false, fault };
}
