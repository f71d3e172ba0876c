import { AsyncLocalStorage, AsyncResource, executionAsyncId } from 'node:async_hooks';
import { describe, expect, it } from 'vitest';
import { useLeanAsyncBind } from '../../../src/runtime/index.js';

type Bind = (this: AsyncResource, fn: unknown, thisArg?: unknown) => (...args: unknown[]) => unknown;
const nodeBind = AsyncResource.prototype.bind as unknown as Bind;

/** What a bound function shows of itself and its call, bound by `bind`. */
function behaviour(bind: Bind, thisArg?: unknown): Record<string, unknown> {
  const storage = new AsyncLocalStorage<string>();
  const resource = storage.run('caller', () => new AsyncResource('test'));
  const holder: { bound?: (...args: unknown[]) => unknown } = {};
  function target(this: unknown, a: unknown, b: unknown): unknown {
    return { scope: executionAsyncId() === resource.asyncId(), store: storage.getStore(), self: this === holder ? 'holder' : this, args: [a, b] };
  }
  holder.bound = bind.call(resource, target, thisArg);
  const { bound } = holder;
  return { call: holder.bound(1, 2), length: bound.length, name: bound.name, accessor: Object.hasOwn(bound, 'asyncResource') };
}

describe('useLeanAsyncBind', () => {
  useLeanAsyncBind();
  const lean = AsyncResource.prototype.bind as unknown as Bind;

  it('replaces Node\'s bind only where it defines the deprecated accessor', () => {
    expect(lean !== nodeBind).toBe(Object.hasOwn(nodeBind.call(new AsyncResource('probe'), () => undefined), 'asyncResource'));
  });

  it('binds as Node does, in the resource\'s scope and context, without the deprecated accessor', () => {
    for (const thisArg of [undefined, { name: 'fixed' }]) {
      const ours = behaviour(lean, thisArg);
      expect(ours.call).toEqual({ scope: true, store: 'caller', self: thisArg ?? 'holder', args: [1, 2] });
      expect(ours.length).toBe(2);
      expect(ours.accessor).toBe(false);
      expect({ ...behaviour(nodeBind, thisArg), accessor: false }).toEqual({ ...ours, accessor: false });
    }
  });

  it('refuses what is not a function with Node\'s own error, and changes nothing when called again', () => {
    expect(() => lean.call(new AsyncResource('test'), 'not a function')).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
    useLeanAsyncBind();
    expect(AsyncResource.prototype.bind).toBe(lean);
    expect(Object.hasOwn(AsyncResource.bind(() => undefined), 'asyncResource')).toBe(false);
  });
});
