/**
 * The broker's counters, read from its admin port's `/metrics` (Prometheus text), so a
 * test can see what the broker itself did with a frame (R40).
 *
 * Owns: `counter`. Never: changes anything on the broker.
 */

/** Bound on one scrape. */
export const SCRAPE_DEADLINE_MS = 5_000;

/** The value of the unlabelled series `name` at `admin` (host:port). */
export async function counter(admin: string, name: string): Promise<number> {
  const response = await fetch(`http://${admin}/metrics`, { signal: AbortSignal.timeout(SCRAPE_DEADLINE_MS) });
  if (!response.ok) throw new Error(`GET /metrics: HTTP ${response.status}`);
  const text = await response.text();
  const line = text.split("\n").find((entry) => entry.startsWith(`${name} `));
  if (line === undefined) throw new Error(`no series ${name} in /metrics`);
  return Number(line.slice(name.length + 1));
}
