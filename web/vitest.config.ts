import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    environment: "node",
    // Signing and recovery in plain JavaScript take milliseconds each; the mining helpers
    // for OWNER and SOC_ID shapes take up to a few seconds on this 2-core machine.
    testTimeout: 60_000,
  },
});
