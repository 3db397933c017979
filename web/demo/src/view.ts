/**
 * What every view of the demo starts from, and the publisher each publishing view starts
 * the same way.
 *
 * Owns: `View` (the page's shell, configuration, key, storage and verifier, as main.ts
 * hands them over), `viewTransport` (the page's broker, each received message verified in
 * the worker first), `viewPublisher` (this page's key in a cohort over that transport, its
 * indices in the page's storage, its events shown in the view), `composeData` and
 * `showEnd`.
 *
 * Never: picks a cohort (each view does) or draws an event itself (publisherLog.ts does).
 */

import {
  Publisher,
  type PublisherEvent,
  type SigningKey,
  type Spec,
  type Transport,
  localStorageStore,
  utf8,
  webSocketTransport,
} from "../../src/index.js";
import type { DemoConfig } from "./config.js";
import { showPublisherEvent } from "./publisherLog.js";
import type { Shell } from "./shell.js";
import type { WorkerVerifier } from "./verifier.js";

/** What a view runs with. */
export interface View {
  readonly shell: Shell;
  readonly config: DemoConfig;
  readonly key: SigningKey;
  readonly storage: Storage;
  readonly verifier: WorkerVerifier;
}

/** Streams to the page's broker, whose every received message the worker checks first. */
export function viewTransport(view: View): Transport {
  return view.verifier.transport(webSocketTransport(view.config.endpoint));
}

/** How a view's publisher differs from the usual one. */
export interface ViewPublisherOptions {
  /** Instead of `viewTransport(view)` (a wrapper of it). */
  readonly transport?: Transport;
  /** Hears each event before the view shows it. */
  readonly onEvent?: (event: PublisherEvent) => void;
}

/** A `Publisher` of the page's key in `spec` (module docs); not yet running. */
export function viewPublisher(view: View, spec: Spec, options: ViewPublisherOptions = {}): Publisher {
  return new Publisher({
    transport: options.transport ?? viewTransport(view),
    admission: view.verifier.admission,
    spec,
    key: view.key,
    store: localStorageStore(view.storage),
    onEvent: (event) => {
      options.onEvent?.(event);
      showPublisherEvent(view.shell, event);
    },
  });
}

/** A compose box whose text `publisher` publishes as DATA, with a note when it cannot. */
export function composeData(view: View, placeholder: string, publisher: Publisher): void {
  view.shell.compose(placeholder, (text) => {
    publisher.publish(utf8(text)).catch((error: unknown) => view.shell.feed.note(`not sent: ${String(error)}`));
  });
}

/** Runs `runner` and shows how its run ended. */
export function showEnd(view: View, runner: { run(): Promise<{ readonly code: string }> }): void {
  void runner.run().then((end) => view.shell.fatal(`ended: ${end.code}`));
}
