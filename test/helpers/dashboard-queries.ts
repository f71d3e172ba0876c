import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** One PromQL query of a dashboard: a panel target or a template variable's `label_values(...)`. */
export interface DashboardQuery {
  dashboard: string;
  /** Panel title, or `variable <name>`. */
  where: string;
  expr: string;
}

interface Panel {
  title?: string;
  targets?: { expr?: string }[];
  panels?: Panel[];
}

interface Dashboard {
  title?: string;
  panels?: Panel[];
  templating?: { list?: { name: string; type: string; query?: string | { query?: string } }[] };
}

function panelQueries(dashboard: string, panels: readonly Panel[]): DashboardQuery[] {
  return panels.flatMap((p) => [
    ...(p.targets ?? []).filter((t) => t.expr).map((t) => ({ dashboard, where: p.title ?? '(untitled panel)', expr: t.expr as string })),
    ...panelQueries(dashboard, p.panels ?? []),
  ]);
}

/** The PromQL of every panel and query variable of the dashboards (*.json) in `dir`. */
export async function dashboardQueries(dir: string): Promise<DashboardQuery[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.json')).sort();
  const out: DashboardQuery[] = [];
  for (const file of files) {
    const json = JSON.parse(await readFile(join(dir, file), 'utf8')) as Dashboard;
    const name = json.title ?? file;
    out.push(...panelQueries(name, json.panels ?? []));
    for (const v of json.templating?.list ?? []) {
      if (v.type !== 'query') continue;
      const query = typeof v.query === 'string' ? v.query : v.query?.query;
      if (query) out.push({ dashboard: name, where: `variable ${v.name}`, expr: query });
    }
  }
  return out;
}

const LABEL_VALUES = /^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$/;

/**
 * The query as Prometheus can run it, with every variable at its "All" value: `$__rate_interval` becomes
 * `rateInterval`, other `$variables` (only ever used in `=~` matchers) become `.+`, and a variable's
 * `label_values(selector, label)` becomes the selector with a non-empty `label`.
 */
export function executableQuery(expr: string, rateInterval: string): string {
  const substituted = expr.replaceAll('$__rate_interval', rateInterval).replace(/\$[a-zA-Z_][a-zA-Z0-9_]*/g, '.+');
  const labelValues = LABEL_VALUES.exec(substituted);
  if (!labelValues) return substituted;
  const [, selector, label] = labelValues as unknown as [string, string, string];
  return selector.includes('{') ? selector.replace(/}\s*$/, `, ${label}=~".+"}`) : `${selector}{${label}=~".+"}`;
}

/** The ControllerMesh metric families a query reads (histogram series map to their family). */
export function metricFamilies(expr: string): string[] {
  const names = expr.match(/\bctrlmesh_[a-z0-9_]+/g) ?? [];
  return [...new Set(names.map((n) => n.replace(/_(bucket|sum|count)$/, '')))].sort();
}
