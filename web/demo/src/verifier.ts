/**
 * Verification off the page's thread: every message a broker sends goes through the
 * bounded `VerifyQueue` to one dedicated Web Worker (`verifyWorker.ts`), which does the
 * costly checks (signature recovery, BMT hash), and reaches the library in arrival order
 * once answered; the library's `Admission` then takes the worker's answer for those exact
 * bytes (`CheckedChunks`, through its `validateSoc` option) and does only the cheap rest
 * (ids, cursors, roster) here. A hostile broker that floods the page costs the worker its
 * time and the page a counter: what the budget drops is counted and shown, and the page
 * stays responsive.
 *
 * Owns: `WorkerVerifier` (the worker, the queue, the answers, the counters) and the
 * transport wrapper that routes a link's messages through it. A link's end reaches the
 * library after the messages that came before it (an end of stream followed by a close
 * stays in that order).
 *
 * Never: checks a peer's chunk on the page. A chunk the worker did not check (only what
 * this page signed itself: an admin applies its own ROSTER as it sends it) is checked here
 * and counted apart (`checkedOnPage`), so the page shows that nothing else was.
 */

import {
  type AdmissionOptions,
  type Link,
  type LinkHandlers,
  type SocValidator,
  type Transport,
  type TransportFault,
  validateSoc,
} from "../../src/index.js";
import { CheckedChunks } from "./checkedChunks.js";
import type { VerifyAnswer, VerifyRequest } from "./verifyCheck.js";
import { type VerifyCounts, VerifyQueue } from "./verifyQueue.js";

/** What the page shows of the verification. */
export interface VerifierCounts extends VerifyCounts {
  /** Chunks checked on the page's own thread (this page's own, module docs). */
  checkedOnPage: number;
  /** Chunks the worker checked and answered for. */
  checkedInWorker: number;
}

/** What the verifier needs of a Worker (a test gives a fake one). */
export interface WorkerLike {
  postMessage(request: VerifyRequest): void;
  addEventListener(type: "message" | "error" | "messageerror", listener: (event: Event) => void): void;
}

/** The page's verification worker, from the page's own origin. */
function startWorker(): WorkerLike {
  return new Worker(new URL("./verifyWorker.js", import.meta.url), { type: "module", name: "bps-verify" });
}

/** One link's state: whose handlers get its messages, and whether it ended. */
interface Target {
  readonly handlers: LinkHandlers;
  /** The library closed it: nothing more reaches its handlers. */
  closedByOwner: boolean;
  /** The far end closed it: told to the handlers after the messages that came first. */
  ended: TransportFault | undefined;
}

/** The page's verification worker (module docs). */
export class WorkerVerifier {
  readonly #worker: WorkerLike;
  readonly #queue = new VerifyQueue<Target>();
  readonly #checked = new CheckedChunks();
  /** Links the far end closed while messages of theirs still waited. */
  readonly #ending = new Set<Target>();
  readonly #onChange: (counts: VerifierCounts) => void;
  #checkedOnPage = 0;
  #checkedInWorker = 0;

  /**
   * Starts the worker (`worker` replaces it in tests); `onChange` hears every change of the
   * counters, `onFailure` a worker that broke.
   */
  constructor(onChange: (counts: VerifierCounts) => void, onFailure: (detail: string) => void, worker: WorkerLike = startWorker()) {
    this.#onChange = onChange;
    this.#worker = worker;
    this.#worker.addEventListener("message", (event) => this.#answer((event as MessageEvent<VerifyAnswer>).data));
    this.#worker.addEventListener("error", (event) => onFailure((event as ErrorEvent).message || "the verification worker failed"));
    this.#worker.addEventListener("messageerror", () => onFailure("the verification worker sent an unreadable answer"));
  }

  /** The counters now. */
  get counts(): VerifierCounts {
    return { ...this.#queue.counts, checkedOnPage: this.#checkedOnPage, checkedInWorker: this.#checkedInWorker };
  }

  /** For `AdmissionOptions.validateSoc`: the worker's answer for these bytes (module docs). */
  readonly validateSoc: SocValidator = (chunk) => {
    const check = this.#checked.take(chunk);
    if (check !== undefined) return check;
    this.#checkedOnPage++;
    this.#changed();
    return validateSoc(chunk);
  };

  /** The options a `Subscriber` or `Publisher` verifies with: the worker's answers. */
  get admission(): AdmissionOptions {
    return { validateSoc: this.validateSoc };
  }

  /** `inner` with every received message going through the worker first. */
  transport(inner: Transport): Transport {
    return {
      open: async (handlers) => {
        const target: Target = { handlers, closedByOwner: false, ended: undefined };
        const link: Link = await inner.open({
          message: (data) => this.#arrive(target, data),
          closed: (fault) => {
            target.ended = fault;
            if (this.#queue.holds(target)) this.#ending.add(target);
            else handlers.closed(fault);
          },
        });
        return {
          send: (message) => link.send(message),
          close: () => {
            target.closedByOwner = true;
            this.#queue.forget(target);
            this.#ending.delete(target);
            this.#changed();
            link.close();
          },
          get bufferedBytes() {
            return link.bufferedBytes;
          },
        };
      },
    };
  }

  #arrive(target: Target, message: Uint8Array): void {
    const offered = this.#queue.offer(message, target);
    if (offered === "pass") this.#deliverReady();
    if (typeof offered === "object") {
      const request: VerifyRequest = { seq: offered.seq, message, arrivedAtMs: Date.now() };
      this.#worker.postMessage(request);
    }
    this.#changed();
  }

  #answer(answer: VerifyAnswer): void {
    if (answer.type === "late") {
      this.#queue.settle(answer.seq, { type: "late" });
    } else {
      if (answer.type === "checked") {
        this.#checkedInWorker++;
        this.#checked.remember(answer.chunk, answer.check);
      }
      this.#queue.settle(answer.seq, { type: "deliver" });
    }
    this.#deliverReady();
    this.#changed();
  }

  #deliverReady(): void {
    for (const { message, target } of this.#queue.takeReady()) {
      if (!target.closedByOwner) target.handlers.message(message);
    }
    for (const target of this.#ending) {
      if (this.#queue.holds(target)) continue;
      this.#ending.delete(target);
      if (!target.closedByOwner && target.ended !== undefined) target.handlers.closed(target.ended);
    }
  }

  #changed(): void {
    this.#onChange(this.counts);
  }
}
