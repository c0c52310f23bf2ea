// `npm run lint` (boundaries part): the layering docs/architecture.md describes, http/ → runs/ → process/ with agents/,
// slots/ and sudo/ plugged in and schemas/ shared, checked on the imports themselves (type-only ones included).
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'process-knows-no-caller',
      comment: 'src/process/ spawns and contains agents; it knows nothing of HTTP, runs, agents, slots or sudo.',
      severity: 'error',
      from: { path: '^src/process/' },
      to: { path: '^src/(http|runs|agents|slots|sudo)/' }
    },
    {
      name: 'runs-know-no-http',
      comment: 'src/runs/ is what the routes call; it never reaches back into src/http/.',
      severity: 'error',
      from: { path: '^src/runs/' },
      to: { path: '^src/http/' }
    },
    {
      name: 'plug-ins-know-no-http-or-runs',
      comment: 'src/agents/, src/slots/, src/sudo/, src/webhooks/, src/workspaces/ and src/fleet/ are plugged into runs: they ' +
        'import neither src/http/ nor src/runs/.',
      severity: 'error',
      from: { path: '^src/(agents|slots|sudo|webhooks|workspaces|fleet)/' },
      to: { path: '^src/(http|runs)/' }
    },
    {
      name: 'no-arrow-up-to-metrics',
      comment: 'The layers tell what they do to whoever listens (RunsObserver); src/metrics.ts is the http layer\'s.',
      severity: 'error',
      from: { path: '^src/(runs|agents|process|slots|sudo|webhooks|workspaces|fleet)/' },
      to: { path: '^src/metrics[.]ts$' }
    },
    {
      name: 'only-the-root-reads-config',
      comment: 'runs/, slots/, process/, sudo/, agents/, webhooks/ and workspaces/ are given the few settings they use by ' +
        'src/service/, never Config.',
      severity: 'error',
      from: { path: '^src/(runs|slots|process|sudo|agents|webhooks|workspaces|fleet)/' },
      to: { path: '^src/config[.]ts$' }
    },
    {
      name: 'the-root-is-on-top',
      comment: 'src/service/ assembles the service from every layer: only the entry (src/server.ts) imports it.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(server[.]ts$|service/)' },
      to: { path: '^src/service/' }
    },
    {
      name: 'schemas-are-a-leaf',
      comment: 'src/schemas/ are the shapes every layer shares: they import only each other and the error catalog.',
      severity: 'error',
      from: { path: '^src/schemas/' },
      to: { path: '^src/', pathNot: '^src/(schemas/|errors[.]ts$)' }
    },
    {
      name: 'no-circular',
      comment: 'A cycle between modules of src/ makes the layering meaningless; break it.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true }
    },
    {
      name: 'no-orphans',
      comment: 'A module of src/ that imports nothing and that nothing imports (src/server.ts, the entry, excepted).',
      severity: 'error',
      from: { orphan: true, path: '^src/', pathNot: '^src/server[.]ts$' },
      to: {}
    },
    {
      // The entries: the service, the document `npm run openapi` writes (scripts/openapi.mjs, through dist/), and the
      // steps thread's code (a worker the service starts by its URL).
      name: 'no-unreachable',
      comment: 'A module of src/ that no entry loads, however it is imported: dead code (or a test helper).',
      severity: 'error',
      from: { path: '^src/(server|service/openapi-document|runs/steps-thread-entry|runs/output-checks-entry)[.]ts$' },
      to: { path: '^src/', pathNot: '^src/(server|service/openapi-document|runs/steps-thread-entry|runs/output-checks-entry)[.]ts', reachable: false }
    },
    {
      name: 'not-to-unresolvable',
      comment: 'An import that resolves to no file or package.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true }
    },
    {
      name: 'no-non-package-json',
      comment: 'A package imported but not in package.json.',
      severity: 'error',
      from: {},
      to: { dependencyTypes: ['npm-no-pkg', 'npm-unknown'] }
    },
    {
      name: 'not-to-dev-dep',
      comment: 'The image installs dependencies only: src/ may not need a devDependency at run time.',
      severity: 'error',
      from: { path: '^src/' },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['type-only'], pathNot: ['node_modules/@types/'] }
    }
  ],
  options: {
    doNotFollow: { path: ['node_modules'] },
    // `import type` counts: a type import across a boundary couples the layers as much as a value import.
    tsPreCompilationDeps: true,
    // NodeNext: relative imports name the .js file, which is the .ts file here.
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.json'],
      mainFields: ['module', 'main', 'types', 'typings']
    },
    skipAnalysisNotInRules: true
  }
}
