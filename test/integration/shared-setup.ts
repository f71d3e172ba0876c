import type { TestProject } from 'vitest/node';
import type { TestbedInfo } from '../../src/dev/index.js';
import startSharedBed from './global-setup.js';

/**
 * The integration and faults projects share ONE test bed: vitest runs each project's global setup (in this one
 * process) before any test, so the first project starts the bed (test/integration/global-setup.ts) and the
 * others get its details; the last project's teardown stops it.
 */
interface Shared {
  info: Promise<TestbedInfo>;
  teardown: Promise<() => Promise<void>>;
  users: number;
}

const KEY = Symbol.for('ctrlmesh.test.sharedBed');
const holder = globalThis as typeof globalThis & { [KEY]?: Shared };

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let shared = holder[KEY];
  if (shared === undefined) {
    let provided: (info: TestbedInfo) => void = () => undefined;
    const info = new Promise<TestbedInfo>((resolve) => (provided = resolve));
    // The bed's setup provides its info to "a project": captured here, then provided to each real one.
    const capture = { provide: (_key: string, value: TestbedInfo) => provided(value) } as unknown as TestProject;
    shared = { info, teardown: startSharedBed(capture), users: 0 };
    holder[KEY] = shared;
  }
  shared.users += 1;
  const current = shared;
  const [info] = await Promise.all([current.info, current.teardown]);
  project.provide('testbed', info);
  return async () => {
    current.users -= 1;
    if (current.users > 0) return;
    delete holder[KEY];
    await (await current.teardown)();
  };
}
