// ESLint for the web package (`npm run lint`, run by scripts/lint and CI): the recommended
// JavaScript rules and typescript-eslint's type-checked recommended rules, over the
// library, its tests, the end-to-end tests and the demo page. Formatting is Prettier's
// (.prettierrc.json), not ESLint's.
import js from "@eslint/js";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  // Generated (buf, from ../proto/bps.proto), built, or installed: not ours to lint.
  { ignores: ["src/gen/", "dist/", "demo/dist/", "node_modules/", "demo/screenshots/"] },
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ["*.js", "demo/*.mjs"] },
        tsconfigRootDir: import.meta.dirname,
      },
      globals: { ...globals.node },
    },
    rules: {
      // `async` is how a method turns its checks' throws into rejections (Publisher.endOfStream, test transports).
      "@typescript-eslint/require-await": "off",
      // A closure may read a `let` before its one assignment (a link that exists only once opened).
      "prefer-const": ["error", { ignoreReadBeforeAssign: true }],
    },
  },
  {
    files: ["demo/src/**/*.ts"],
    languageOptions: { globals: { ...globals.browser } },
  },
  {
    files: ["**/*.js", "**/*.mjs"],
    extends: [tseslint.configs.disableTypeChecked],
  },
);
