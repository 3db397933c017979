/**
 * Placement by cohort key (docs/SCALING.md): the vectors the Rust implementation wrote
 * (proto/vectors/placement.json) computed here from the same Join fields, and a Subscriber
 * and a Publisher given a broker list joining the cohort's root and failing over in rank
 * order, over in-memory brokers (`Relay`).
 */

import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it, vi } from "vitest";

import {
  BROKER_NAME_BYTES_MAX,
  type Binding,
  PlacementError,
  Publisher,
  type PublisherEvent,
  PublisherRegime,
  Subscriber,
  type SubscriberEvent,
  TopicBinding,
  type Transport,
  TransportError,
  brokerList,
  brokerName,
  cohortKey,
  fromHex,
  makeSpec,
  placementWeight,
  rankBrokers,
  toHex,
  webSocketBrokers,
} from "../src/index.js";
import { key, spec, thrownBy } from "./fixtures.js";
import { Relay, instantSleep } from "./relay.js";

const here = dirname(fileURLToPath(import.meta.url));
/** Generous: the machine may be loaded; nothing here waits for a real clock. */
const WAIT = { timeout: 10_000 };

interface Vectors {
  readonly tag: string;
  readonly cases: readonly {
    readonly cohort: {
      readonly topic: string;
      readonly binding: string;
      readonly admin: string;
      readonly publishers: string;
      readonly history: boolean;
      readonly closed: boolean;
    };
    readonly key: string;
    readonly brokers: readonly string[];
    readonly weights: readonly string[];
    readonly ranking: readonly string[];
  }[];
  readonly errors: readonly { readonly brokers: readonly string[]; readonly error: string }[];
}

const vectors = JSON.parse(readFileSync(resolve(here, "../../proto/vectors/placement.json"), "utf8")) as Vectors;

/** The canonical key of the Join fields of a vector, built as this client builds any spec. */
function keyOf(cohort: Vectors["cases"][number]["cohort"]): Uint8Array {
  return cohortKey(
    makeSpec({
      topic: fromHex(cohort.topic, 32),
      binding: TopicBinding[cohort.binding as keyof typeof TopicBinding] as Binding,
      admin: cohort.admin === "" ? undefined : fromHex(cohort.admin, 20),
      all: cohort.publishers === PublisherRegime[PublisherRegime.ALL],
      history: cohort.history,
      closed: cohort.closed,
    }),
  );
}

describe("the shared placement vectors", () => {
  it("cover several cohorts and lists, and the errors", () => {
    expect(vectors.tag).toBe("bps/placement/v1");
    expect(vectors.cases.length).toBeGreaterThanOrEqual(16);
    expect(vectors.errors.map((error) => error.error).sort()).toEqual(["duplicate-name", "empty-list", "empty-name", "name-too-long"]);
  });

  it.each(vectors.cases.map((vector, index) => [index, vector] as const))("case %i: same key, weights and ranking as Rust", (_, vector) => {
    const key = keyOf(vector.cohort);
    expect(toHex(key)).toBe(vector.key);
    const names = vector.brokers.map(brokerName);
    expect(names.map((name) => toHex(placementWeight(name, key)))).toEqual(vector.weights);
    expect(rankBrokers(vector.brokers, key).map((position) => names[position])).toEqual(vector.ranking);
  });

  it.each(vectors.errors.map((vector) => [vector.error, vector] as const))("a list with %s is refused", (code, vector) => {
    const error = thrownBy(() => rankBrokers(vector.brokers, fromHex(vectors.cases[0]!.key)));
    expect(error).toBeInstanceOf(PlacementError);
    expect((error as PlacementError).fault.code).toBe(code);
  });

  it("trims ASCII whitespace only, and bounds a name in UTF-8 bytes", () => {
    expect(brokerName(" \t a:1 \r\n")).toBe("a:1");
    expect(brokerName("\u00a0a:1")).toBe("\u00a0a:1");
    const key = fromHex(vectors.cases[0]!.key);
    expect(rankBrokers(["é".repeat(BROKER_NAME_BYTES_MAX / 2)], key)).toEqual([0]);
    const error = thrownBy(() => rankBrokers(["é".repeat(BROKER_NAME_BYTES_MAX / 2 + 1)], key)) as PlacementError;
    expect(error.fault).toEqual({ code: "name-too-long", position: 0, bytes: BROKER_NAME_BYTES_MAX + 2 });
  });
});

const admin = key(1);
const cohort = spec(admin, TopicBinding.FEED_TOPIC);
const NAMES = ["broker-a:1637", "broker-b:1637", "broker-c:1637"];
/** The names in the cohort's rank order, root first. */
const RANKED = rankBrokers(NAMES, cohortKey(cohort)).map((position) => NAMES[position]!);

/** A broker that refuses every connection, counting the attempts. */
function down(): Transport & { attempts: number } {
  const transport = {
    attempts: 0,
    open() {
      transport.attempts += 1;
      return Promise.reject(new TransportError({ code: "connect-failed", detail: "down" }, "cannot connect: down"));
    },
  };
  return transport;
}

interface Brokers {
  readonly relays: Map<string, Relay>;
  readonly root: ReturnType<typeof down>;
}

/** Three brokers: the root is down, the other two are in-memory relays. */
function rootDown(): Brokers {
  const root = down();
  const relays = new Map(RANKED.slice(1).map((name) => [name, new Relay()]));
  return { relays, root };
}

function transportFor({ relays, root }: Brokers): (name: string) => Transport {
  return (name) => relays.get(name)?.transport ?? root;
}

describe("a broker list", () => {
  it("is ranked once per cohort; a list that cannot be ranked fails at construction", () => {
    expect(new Set(RANKED).size).toBe(3);
    const bad = thrownBy(() => brokerList(["a:1", " a:1"], () => down()));
    expect((bad as PlacementError).fault).toEqual({ code: "duplicate-name", name: "a:1" });
    expect(webSocketBrokers([" ws://a:1639/bps/v1", "ws://b:1639/bps/v1"]).brokers).toEqual(["ws://a:1639/bps/v1", "ws://b:1639/bps/v1"]);
  });

  it("a Subscriber joins the root and nothing else while the root is up", async () => {
    const relays = new Map(NAMES.map((name) => [name, new Relay()]));
    const events: SubscriberEvent[] = [];
    const subscriber = new Subscriber({
      transport: brokerList(NAMES, (name) => relays.get(name)!.transport),
      spec: cohort,
      sleep: instantSleep(),
      onEvent: (event) => events.push(event),
    });
    const running = subscriber.run();
    await vi.waitFor(() => expect(events.filter((event) => event.type === "joined").length).toBe(1), WAIT);
    expect(RANKED.map((name) => relays.get(name)!.streams.length)).toEqual([1, 0, 0]);
    subscriber.stop();
    expect(await running).toEqual({ code: "stopped" });
  });

  it("a Subscriber whose root is down joins the next in rank, and a lost stream moves on, wrapping around", async () => {
    const brokers = rootDown();
    const events: SubscriberEvent[] = [];
    const subscriber = new Subscriber({
      transport: brokerList(NAMES, transportFor(brokers)),
      spec: cohort,
      sleep: instantSleep(),
      onEvent: (event) => events.push(event),
    });
    const running = subscriber.run();
    const second = brokers.relays.get(RANKED[1]!)!;
    const third = brokers.relays.get(RANKED[2]!)!;
    await vi.waitFor(() => expect(second.streams.length).toBe(1), WAIT);
    expect(brokers.root.attempts).toBe(1);
    expect(third.streams).toEqual([]);
    second.streams[0]!.peer.close(1011, "going away");
    await vi.waitFor(() => expect(third.streams.length).toBe(1), WAIT);
    third.streams[0]!.peer.close(1011, "going away");
    await vi.waitFor(() => expect(brokers.root.attempts).toBe(2), WAIT);
    await vi.waitFor(() => expect(second.streams.length).toBe(2), WAIT);
    const nexts = events.flatMap((event) => (event.type === "reset" && event.next !== undefined ? [event.next] : []));
    expect(nexts).toEqual([RANKED[1], RANKED[2], RANKED[0], RANKED[1]]);
    subscriber.stop();
    expect(await running).toEqual({ code: "stopped" });
  });

  it("a Publisher fails over the same way and publishes at the next in rank", async () => {
    const brokers = rootDown();
    const events: PublisherEvent[] = [];
    const publisher = new Publisher({
      transport: brokerList(NAMES, transportFor(brokers)),
      spec: cohort,
      key: admin,
      sleep: instantSleep(),
      onEvent: (event) => events.push(event),
    });
    const running = publisher.run();
    const second = brokers.relays.get(RANKED[1]!)!;
    await vi.waitFor(() => expect(second.streams.length).toBe(1), WAIT);
    expect(second.streams[0]!.addr).toBe(toHex(admin.address));
    expect(brokers.root.attempts).toBe(1);
    publisher.stop();
    expect(await running).toEqual({ code: "stopped" });
  });

  it("one transport behaves as before: every retry goes to it and resets name no next broker", async () => {
    const relay = new Relay();
    const events: SubscriberEvent[] = [];
    const subscriber = new Subscriber({
      transport: relay.transport,
      spec: cohort,
      sleep: instantSleep(),
      onEvent: (event) => events.push(event),
    });
    const running = subscriber.run();
    await vi.waitFor(() => expect(relay.streams.length).toBe(1), WAIT);
    relay.streams[0]!.peer.close(1011, "going away");
    await vi.waitFor(() => expect(relay.streams.length).toBe(2), WAIT);
    expect(events.filter((event) => event.type === "reset")).not.toContainEqual(
      expect.objectContaining({ next: expect.anything() as unknown }),
    );
    subscriber.stop();
    expect(await running).toEqual({ code: "stopped" });
  });
});
