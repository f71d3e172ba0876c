import { collectDefaultMetrics, Registry } from 'prom-client';

/**
 * prom-client's default process metrics include three gauges whose names end in `_total`
 * (nodejs_active_{handles,requests,resources}_total), which `promtool check metrics` rejects for a
 * non-counter. They are collected into a private registry and exposed with the suffix `_all` instead (Debian's
 * promtool 2.42 also refuses `_count` on a gauge, and the bare names are taken by the per-type gauges).
 */
const MISNAMED_DEFAULT_GAUGE = /\bnodejs_active_(handles|requests|resources)_total\b/g;

/** The one registry of a process: default process metrics (promtool-clean) plus the component's own. */
export function createRegistry(component: string): Registry {
  const registry = new Registry();
  const defaults = new Registry();
  registry.setDefaultLabels({ component });
  defaults.setDefaultLabels({ component });
  collectDefaultMetrics({ register: defaults });
  const ownMetrics = registry.metrics.bind(registry);
  registry.metrics = async () => {
    const builtin = (await defaults.metrics()).replace(MISNAMED_DEFAULT_GAUGE, 'nodejs_active_$1_all');
    return `${builtin.trimEnd()}\n${await ownMetrics()}`;
  };
  return registry;
}
