// `npm run lint` (ESLint part): neostandard (standard's rules for ESLint 9, with TypeScript) and typescript-eslint's
// strict type-checked rules. See docs/CONTRIBUTING.md.
import neostandard, { resolveIgnoresFromGitignore } from 'neostandard'
import tseslint from 'typescript-eslint'

const TS = ['**/*.ts']
const TEST_CODE = ['test/**/*.ts', 'stress/**/*.ts', 'wine/**/*.ts']

export default [
  ...neostandard({
    ts: true,
    noJsx: true,
    ignores: [...resolveIgnoresFromGitignore(), 'test/generated/**'],
  }),

  // Where the project's style differs from standard's, the project's is kept (configured, not churned):
  {
    name: 'agent-runner/style',
    rules: {
      // `function name(` and `method(`, as the code is written; `async () =>` and `function ()` keep their space.
      '@stylistic/space-before-function-paren': ['error', { anonymous: 'always', named: 'never', asyncArrow: 'always' }],
      // `async function* follow(` and `yield* rest`: the star belongs to the keyword.
      '@stylistic/generator-star-spacing': ['error', { before: false, after: true }],
      '@stylistic/yield-star-spacing': ['error', 'after'],
      // Single quotes, and a template literal for a string holding both kinds of quotes (a shell line with JSON in
      // it), which standard would have escaped.
      '@stylistic/quotes': ['error', 'single', { avoidEscape: true, allowTemplateLiterals: true }],
      // `void promise` marks a promise deliberately left to run, as no-floating-promises asks, also as an arrow's body
      // (`() => void flush()`).
      'no-void': 'off',
    },
  },
  {
    name: 'agent-runner/max-len',
    files: ['src/**/*.ts', 'e2e/**/*.ts', ...TEST_CODE],
    // wrapped by their owners next
    ignores: ['test/limits/confined-marks.test.ts'],
    rules: {
      '@stylistic/max-len': ['error', { code: 120, tabWidth: 2, ignoreUrls: true }],
    },
  },

  // Type-aware rules on the TypeScript files (every one of them is in tsconfig.json).
  ...tseslint.configs.strictTypeChecked.map((config) => ({ ...config, files: TS })),
  {
    name: 'agent-runner/typescript',
    files: TS,
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/consistent-type-imports': 'error',
      // tap's t.test() returns a promise that tap itself awaits.
      '@typescript-eslint/no-floating-promises': ['error', {
        allowForKnownSafeCalls: [{ from: 'package', package: '@tapjs/test', name: 'test' }],
      }],
      // Numbers in messages are fine; undefined, objects and the like are not.
      '@typescript-eslint/restrict-template-expressions': ['error', {
        allowNumber: true, allowAny: false, allowBoolean: false, allowNullish: false, allowRegExp: false,
      }],
      // Forwarding an error caught as unknown is not making one.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingUnknown: true }],
      // The MCP SDK marks its low-level Server deprecated in favour of McpServer "except for advanced use cases": the
      // MCP route is one (its tools take the REST routes' JSON Schemas, which McpServer would want as zod).
      '@typescript-eslint/no-deprecated': ['error', {
        allow: [{ from: 'package', package: '@modelcontextprotocol/sdk', name: 'Server' }],
      }],
      // A TypeBox schema and its Static type share a name (`RunResult` the value and the type): a deliberate pattern,
      // and TypeScript itself reports real redeclarations.
      '@typescript-eslint/no-redeclare': 'off',
      // Off, not cheap and not wanted (strictTypeChecked has them):
      // with noUncheckedIndexedAccess the code asserts `!` where it knows better than the index type;
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Fastify handlers and interface implementations are async without awaiting anything;
      '@typescript-eslint/require-await': 'off',
      // `(chunk) => writer.send(chunk)` arrow shorthands returning void are the house style.
      '@typescript-eslint/no-confusing-void-expression': 'off',
    },
  },
  {
    name: 'agent-runner/test-code',
    files: TEST_CODE,
    rules: {
      // Tests read JSON bodies and stream chunks as they come.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/restrict-plus-operands': ['error', { allowAny: true }],
      // A test's message may print what it got, undefined included.
      '@typescript-eslint/restrict-template-expressions': ['error', {
        allowNumber: true, allowAny: true, allowBoolean: true, allowNullish: true, allowRegExp: false,
      }],
      // The service as it runs, compiled (dist/, what coverage maps back to src/): `#src/…`, never a path into src/.
      'no-restricted-imports': ['error', {
        patterns: [{ group: ['**/src/*', '**/src/**'], message: 'Import the service as #src/… (package.json imports).' }],
      }],
    },
  },

]
