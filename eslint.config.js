// @ts-check
import tseslint from 'typescript-eslint';

/**
 * Dependencies point one way: api, sharding (pure), runtime and tls (domain-free) <- transport, kube, metrics
 * <- hub, agent, proxy, dev (the test bed) <- demo <- cli. Production code (everything but dev, demo and cli) never
 * imports the test bed or the demo; nothing but the CLI imports the demo.
 * Each entry forbids a folder from importing the ones that sit above it (or beside it, for the processes).
 */
const aboveProduction = ['dev', 'demo', 'cli'];
const layers = {
  api: ['sharding', 'transport', 'hub', 'agent', 'proxy', 'metrics', 'kube', 'tls', ...aboveProduction],
  sharding: ['transport', 'hub', 'agent', 'proxy', 'metrics', 'kube', 'tls', ...aboveProduction],
  // Process plumbing (timers, scheduling) shared by the long-running processes; it knows nothing of the domain.
  runtime: ['api', 'sharding', 'transport', 'kube', 'metrics', 'hub', 'agent', 'proxy', 'tls', ...aboveProduction],
  // x509 certificate generation (CAs, serving and client certificates); it knows nothing of the domain.
  tls: ['api', 'sharding', 'runtime', 'transport', 'kube', 'metrics', 'hub', 'agent', 'proxy', ...aboveProduction],
  transport: ['hub', 'agent', 'proxy', ...aboveProduction],
  kube: ['hub', 'agent', 'proxy', 'transport', ...aboveProduction],
  metrics: ['hub', 'agent', 'proxy', ...aboveProduction],
  hub: ['agent', 'proxy', ...aboveProduction],
  agent: ['hub', 'proxy', ...aboveProduction],
  proxy: ['hub', 'agent', ...aboveProduction],
  // The test bed runs the hub, agents and proxies as processes (through the CLI); it never links them.
  dev: ['hub', 'agent', 'proxy', 'demo', 'cli'],
  // The demo: a bed with the mesh running on it; it may use everything below it, and only the CLI uses it.
  demo: ['cli'],
};

/** The patterns that keep src/<folder> off the folders above it. */
const layerPatterns = (folder) =>
  layers[folder].map((f) => ({
    group: [`../${f}/*`, `../${f}`, `../../${f}/*`, `../../${f}`, `../../../${f}/*`, `../../../${f}`],
    message: `src/${folder} must not depend on src/${f} (see docs/architecture.md, "Dependencies point one way").`,
  }));

const boundaryRules = Object.keys(layers).map((folder) => ({
  files: [`src/${folder}/**/*.ts`],
  rules: { 'no-restricted-imports': ['error', { patterns: layerPatterns(folder) }] },
}));

/**
 * Inside the proxy, rooms import one way too: rules <- rule-files; upstream <- routes <- request; in request/,
 * parse <- judgement <- answer <- entry; webhook and egress beside the request path. From outside, upstream/ is
 * reached through its index only. Each entry lists what a room must not import, as paths under src/proxy.
 */
const proxyRooms = {
  rules: ['upstream', 'routes', 'request', 'webhook', 'egress', 'rule-files'],
  'rule-files': ['upstream', 'routes', 'request', 'webhook', 'egress'],
  upstream: ['routes', 'request', 'webhook', 'egress', 'rules', 'rule-files'],
  routes: ['request/judgement', 'request/answer', 'request/entry', 'webhook', 'egress', 'rule-files'],
  'request/parse': ['upstream', 'routes', 'request/judgement', 'request/answer', 'request/entry', 'webhook', 'egress', 'rules', 'rule-files'],
  'request/judgement': ['upstream', 'request/answer', 'request/entry', 'webhook', 'egress', 'rule-files'],
  'request/answer': ['request/entry', 'webhook', 'egress', 'rules', 'rule-files'],
  'request/entry': ['webhook', 'egress', 'rule-files'],
  webhook: ['request/answer', 'request/entry', 'egress', 'rule-files'],
  egress: ['upstream', 'routes', 'request/judgement', 'request/answer', 'request/entry', 'webhook', 'rule-files'],
};
/** upstream/'s insides, which no other room imports (its index is its face). */
const upstreamInsides = ['**/upstream/*', '!**/upstream/index.js'];

const proxyRoomRules = Object.entries(proxyRooms).map(([room, forbidden]) => ({
  files: [`src/proxy/${room}/**/*.ts`],
  rules: {
    'no-restricted-imports': [
      'error',
      {
        // This entry replaces the proxy's own for these files, so it carries the proxy's layer patterns as well.
        patterns: [
          ...layerPatterns('proxy'),
          ...forbidden.map((f) => ({
            // A sibling room inside request/ is imported as ../<room>/; any other as .../<path under src/proxy>/.
            group: [`**/proxy/${f}/*`, `../${f}/*`, `../../${f}/*`, ...(f.startsWith('request/') ? [`../${f.slice('request/'.length)}/*`] : [])],
            message: `src/proxy/${room} must not depend on src/proxy/${f} (see docs/architecture.md, "The proxy's rooms").`,
          })),
          ...(room === 'upstream' ? [] : [{ group: upstreamInsides, message: 'import src/proxy/upstream through its index.js.' }]),
        ],
      },
    ],
  },
}));

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bench/results/**', 'coverage/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-console': 'error',
    },
  },
  {
    // The CLI, dev scripts and benchmarks write their results to stdout on purpose.
    files: ['src/cli/**/*.ts', 'bench/**/*.ts', 'test/**/*.ts', 'src/dev/**/*.ts'],
    rules: { 'no-console': 'off' },
  },
  ...boundaryRules,
  ...proxyRoomRules,
);
