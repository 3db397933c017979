/**
 * The reconnect loop (R5, R38) as both of its owners show it, over the in-memory transport
 * and the scripted `Relay`: the same refusals, resets, backoff delays and stops give the
 * same events and ends from a `Publisher` and from a `Subscriber`.
 */

import { describe, expect, it, vi } from "vitest";

import {
  Backoff,
  Publisher,
  type PublisherEvent,
  type Sleep,
  Status,
  Subscriber,
  type SubscriberEvent,
  TopicBinding,
} from "../src/index.js";
import { key, spec } from "./fixtures.js";
import { Relay, instantSleep } from "./relay.js";

const admin = key(1);
/** Generous: the machine may be loaded; nothing here waits for a real clock. */
const WAIT = { timeout: 10_000 };

interface Runner {
  readonly events: (PublisherEvent | SubscriberEvent)[];
  readonly running: Promise<{ readonly code: string }>;
  stop(): void;
}

interface RunOptions {
  readonly reconnect?: boolean;
  readonly sleep?: Sleep;
  readonly backoff?: Backoff;
}

/** Starts a publisher or a subscriber of one cohort on `relay`, recording its events. */
type Start = (relay: Relay, options: RunOptions) => Runner;

const owners: [string, Start][] = [
  [
    "Publisher",
    (relay, options) => {
      const events: PublisherEvent[] = [];
      const publisher = new Publisher({
        transport: relay.transport,
        spec: spec(admin, TopicBinding.FEED_TOPIC),
        key: admin,
        sleep: instantSleep(),
        onEvent: (event) => events.push(event),
        ...options,
      });
      return { events, running: publisher.run(), stop: () => publisher.stop() };
    },
  ],
  [
    "Subscriber",
    (relay, options) => {
      const events: SubscriberEvent[] = [];
      const subscriber = new Subscriber({
        transport: relay.transport,
        spec: spec(admin, TopicBinding.FEED_TOPIC),
        sleep: instantSleep(),
        onEvent: (event) => events.push(event),
        ...options,
      });
      return { events, running: subscriber.run(), stop: () => subscriber.stop() };
    },
  ],
];

const ofType = (runner: Runner, type: string) => runner.events.filter((event) => event.type === type);

/** A sleep that records the delay and returns only when the run is stopped. */
function untilStopped(delays: number[]): Sleep {
  return (ms, signal) => {
    delays.push(ms);
    return new Promise((resolve) => signal?.addEventListener("abort", () => resolve(), { once: true }));
  };
}

describe.each(owners)("the reconnect loop of a %s", (_, start) => {
  it("without reconnect, FULL ends the run as full, reported once with no retry", async () => {
    const relay = new Relay();
    relay.statuses.push(Status.FULL);
    const runner = start(relay, { reconnect: false });
    expect(await runner.running).toEqual({ code: "full" });
    expect(ofType(runner, "refused")).toStrictEqual([{ type: "refused", status: Status.FULL }]);
    expect(relay.streams).toEqual([]);
  });

  it("without reconnect, a reset ends the run with its fault, reported once with no retry", async () => {
    const relay = new Relay();
    const runner = start(relay, { reconnect: false });
    await vi.waitFor(() => expect(ofType(runner, "joined").length).toBe(1), WAIT);
    relay.streams[0]!.peer.close(1011, "reset");
    const end = await runner.running;
    expect(end).toMatchObject({ code: "reset", fault: { code: "transport" } });
    const resets = ofType(runner, "reset");
    expect(resets.length).toBe(1);
    expect(resets[0]).not.toHaveProperty("retryInMs");
    expect(relay.streams.length).toBe(1);
  });

  it("the backoff grows while Joins are refused and starts over once one is answered OK", async () => {
    const relay = new Relay();
    relay.statuses.push(Status.FULL, Status.FULL);
    const delays: number[] = [];
    // Always the top of the range: the delay is the ceiling, 2 s, 4 s, ... (R38).
    const runner = start(relay, { sleep: instantSleep(delays), backoff: new Backoff((bound) => bound - 1) });
    await vi.waitFor(() => expect(relay.streams.length).toBe(1), WAIT);
    relay.streams[0]!.peer.close(1011, "reset");
    await vi.waitFor(() => expect(relay.streams.length).toBe(2), WAIT);
    expect(delays).toEqual([2000, 4000, 2000]);
    expect(ofType(runner, "refused").map((event) => "retryInMs" in event && event.retryInMs)).toEqual([2000, 4000]);
    expect(ofType(runner, "reset")).toMatchObject([{ retryInMs: 2000, fault: { code: "transport" } }]);
    runner.stop();
    expect(await runner.running).toEqual({ code: "stopped" });
  });

  it("a stop ends a backoff wait at once, and no Join follows", async () => {
    const relay = new Relay();
    relay.statuses.push(Status.FULL);
    const delays: number[] = [];
    const runner = start(relay, { sleep: untilStopped(delays) });
    await vi.waitFor(() => expect(delays.length).toBe(1), WAIT);
    runner.stop();
    expect(await runner.running).toEqual({ code: "stopped" });
    expect(relay.streams).toEqual([]);
  });

  it("a stop ends the open stream; the reset it causes is not reported", async () => {
    const relay = new Relay();
    const runner = start(relay, {});
    await vi.waitFor(() => expect(ofType(runner, "joined").length).toBe(1), WAIT);
    runner.stop();
    expect(await runner.running).toEqual({ code: "stopped" });
    expect(relay.streams[0]!.peer.ended).toBe(true);
    expect(ofType(runner, "reset")).toEqual([]);
  });
});
