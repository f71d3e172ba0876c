import { defineConfig } from 'vitest/config';

// The long fault suite runs in a project of its own; both projects use one shared test bed.
const FAULTS = ['test/integration/faults.test.ts'];

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          environment: 'node',
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          exclude: FAULTS,
          environment: 'node',
          // One test bed (etcd, API servers, NATS) is started once and shared by every file (and the faults project).
          globalSetup: ['test/integration/shared-setup.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          // Files share the servers; running them one at a time keeps a 2-core machine responsive.
          fileParallelism: false,
        },
      },
      {
        test: {
          // A real node (containerd, kubelet) with the mesh helm-installed in pods: its own bed, started in the file.
          name: 'node',
          include: ['test/node/**/*.test.ts'],
          environment: 'node',
          testTimeout: 300_000,
          hookTimeout: 1_500_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          // Faults timed through real proxies (about 3 minutes): never beside another integration file, whose load
          // would blur the timings; one file at a time, like the integration files, so it joins their sequential group.
          name: 'faults',
          include: FAULTS,
          environment: 'node',
          globalSetup: ['test/integration/shared-setup.ts'],
          testTimeout: 180_000,
          hookTimeout: 240_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
