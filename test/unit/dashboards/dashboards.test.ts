import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { dashboardQueries, executableQuery, metricFamilies } from '../../helpers/dashboard-queries.js';

const DIR = 'dashboards';
const files = readdirSync(DIR).filter((f) => f.endsWith('.json'));

interface Panel {
  type: string;
  title?: string;
  description?: string;
  datasource?: { uid?: string };
  fieldConfig?: { defaults?: { unit?: string } };
  targets?: { expr: string }[];
}

describe('dashboards', () => {
  it('there are the fleet, cluster and operator/shard dashboards', () => {
    expect(files.sort()).toEqual(['cluster.json', 'fleet.json', 'operator-shards.json']);
  });

  it.each(files)('%s: every panel has a title, a description, a unit and the datasource variable', (file) => {
    const json = JSON.parse(readFileSync(`${DIR}/${file}`, 'utf8')) as { uid: string; panels: Panel[]; templating: { list: { name: string }[] } };
    expect(json.templating.list.map((v) => v.name).slice(0, 3)).toEqual(['datasource', 'job', 'instance']);
    for (const panel of json.panels.filter((p) => p.type !== 'row')) {
      expect(panel.title, file).toBeTruthy();
      expect(panel.description, `${file}: ${panel.title}`).toBeTruthy();
      expect(panel.fieldConfig?.defaults?.unit, `${file}: ${panel.title}`).toBeTruthy();
      expect(panel.datasource?.uid).toBe('${datasource}');
    }
  });

  it('every query selects job and instance by variable and takes rates over $__rate_interval', async () => {
    const queries = await dashboardQueries(DIR);
    expect(queries.length).toBeGreaterThan(30);
    for (const q of queries.filter((q) => !q.where.startsWith('variable'))) {
      for (const family of metricFamilies(q.expr)) {
        const selectors = q.expr.match(new RegExp(`${family}(?:_bucket)?\\{[^}]*\\}`, 'g')) ?? [];
        expect(selectors.length, `${q.dashboard} / ${q.where}: ${family} without a selector`).toBeGreaterThan(0);
        for (const s of selectors) expect(s, `${q.dashboard} / ${q.where}`).toMatch(/job=~"\$job", instance=~"\$instance"/);
      }
      for (const range of q.expr.match(/\[[^\]]+\]/g) ?? []) expect(range, `${q.dashboard} / ${q.where}`).toBe('[$__rate_interval]');
    }
  });

  it('turns variables into their All values', () => {
    expect(executableQuery('sum(rate(x{job=~"$job", cluster=~"$cluster"}[$__rate_interval]))', '30s')).toBe('sum(rate(x{job=~".+", cluster=~".+"}[30s]))');
    expect(executableQuery('label_values(m{job=~"$job"}, cluster)', '1m')).toBe('m{job=~".+", cluster=~".+"}');
    expect(executableQuery('label_values(m, job)', '1m')).toBe('m{job=~".+"}');
    expect(metricFamilies('histogram_quantile(0.9, rate(ctrlmesh_a_seconds_bucket[1m])) / ctrlmesh_b')).toEqual(['ctrlmesh_a_seconds', 'ctrlmesh_b']);
  });
});
