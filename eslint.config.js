// @ts-check
import tseslint from 'typescript-eslint';

/**
 * Dependencies point one way: api, sharding (pure) and runtime <- transport and dev <- hub, agent, proxy <- cli.
 * Each entry forbids a folder from importing the ones that sit above it (or beside it, for the processes).
 */
const layers = {
  api: ['sharding', 'transport', 'hub', 'agent', 'proxy', 'metrics', 'cli', 'dev', 'kube'],
  sharding: ['transport', 'hub', 'agent', 'proxy', 'metrics', 'cli', 'dev', 'kube'],
  transport: ['hub', 'agent', 'proxy', 'cli', 'dev'],
  kube: ['hub', 'agent', 'proxy', 'cli', 'dev', 'transport'],
  metrics: ['hub', 'agent', 'proxy', 'cli', 'dev'],
  // Process plumbing (timers, scheduling) shared by the long-running processes; it knows nothing of the domain.
  runtime: ['api', 'sharding', 'transport', 'kube', 'metrics', 'hub', 'agent', 'proxy', 'cli', 'dev'],
  hub: ['agent', 'proxy', 'cli'],
  agent: ['hub', 'proxy', 'cli'],
  proxy: ['hub', 'agent', 'cli'],
  dev: ['hub', 'agent', 'proxy', 'cli'],
};

const boundaryRules = Object.entries(layers).map(([folder, forbidden]) => ({
  files: [`src/${folder}/**/*.ts`],
  rules: {
    'no-restricted-imports': [
      'error',
      {
        patterns: forbidden.map((f) => ({
          group: [`../${f}/*`, `../${f}`, `../../${f}/*`, `../../${f}`],
          message: `src/${folder} must not depend on src/${f} (see docs/architecture.md, "Dependencies point one way").`,
        })),
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
);
