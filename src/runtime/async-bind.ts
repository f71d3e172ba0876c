import { AsyncResource } from 'node:async_hooks';

type Bind = (this: AsyncResource, fn: (...args: unknown[]) => unknown, thisArg?: unknown) => (...args: unknown[]) => unknown;

/**
 * Gives `AsyncResource#bind` the form it has from Node 25 on (nodejs/node#58618, DEP0172 end-of-life): the bound
 * function without the deprecated `asyncResource` accessor, which Node 20 to 24 define on every bound function
 * through `util.deprecate`. node:http2 binds every request it sends, and that accessor is about a third of what
 * opening a stream costs on Node 20 (docs/proxy.md, "Important design decisions"): the proxy sends every sharded
 * watch as a stream.
 * Nothing else changes: the function runs in the resource's async scope with its caller's `this` (or `thisArg`),
 * keeps `fn.length`, and a non-function is refused with Node's own error. Does nothing where Node's `bind` no
 * longer defines the accessor; calling it again changes nothing.
 */
export function useLeanAsyncBind(): void {
  const prototype = AsyncResource.prototype as unknown as { bind: Bind };
  if (!Object.hasOwn(new AsyncResource('ctrlmesh.probe').bind(() => undefined), 'asyncResource')) return;
  const nodeBind = prototype.bind;
  prototype.bind = function bind(this: AsyncResource, fn, thisArg) {
    return typeof fn === 'function' ? boundTo(this, fn, thisArg) : nodeBind.call(this, fn, thisArg);
  };
}

/** Node's bound function, as `bind` makes it. */
function boundTo(resource: AsyncResource, fn: (...args: unknown[]) => unknown, thisArg: unknown): (...args: unknown[]) => unknown {
  const bound =
    thisArg === undefined
      ? function bound(this: unknown, ...args: unknown[]): unknown {
          return resource.runInAsyncScope(fn, this, ...args);
        }
      : resource.runInAsyncScope.bind(resource, fn, thisArg);
  Object.defineProperty(bound, 'length', { configurable: true, enumerable: false, value: fn.length, writable: false });
  return bound;
}
