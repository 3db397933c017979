import { defineConfig } from "vitest/config";

// The end-to-end tests (web/scripts/e2e): real Chromium, the real broker, the real bps CLI.
export default defineConfig({
  test: {
    include: ["e2e/**/*.e2e.test.ts"],
    environment: "node",
    globalSetup: ["e2e/globalSetup.ts"],
    // One file at a time: the machine has 2 cores, and the jam test reads global counters.
    fileParallelism: false,
    // Each wait inside a test has its own deadline (PAGE_DEADLINE_MS and the CLI's); this
    // bounds a whole test.
    testTimeout: 90_000,
    hookTimeout: 60_000,
  },
});
