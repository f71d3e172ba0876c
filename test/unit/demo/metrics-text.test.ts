import { describe, expect, it } from 'vitest';
import { parseMetricsText, sumBy } from '../../../src/demo/metrics-text.js';

const page = [
  '# HELP ctrlmesh_proxy_requests_total API requests.',
  '# TYPE ctrlmesh_proxy_requests_total counter',
  'ctrlmesh_proxy_requests_total{cluster="cluster-a",verb="list",code="200",component="proxy"} 7',
  'ctrlmesh_proxy_requests_total{cluster="cluster-a",verb="get",code="404",component="proxy"} 2',
  'ctrlmesh_proxy_requests_total{cluster="cluster-b",verb="list",code="200",component="proxy"} 1.5',
  'ctrlmesh_proxy_request_duration_seconds_bucket{le="+Inf",cluster="cluster-a"} 9',
  'weird{msg="a \\"quoted\\", comma\\nand newline",x="y"} 1 1700000000000',
  'plain_gauge 3',
  '',
].join('\n');

describe('parseMetricsText', () => {
  it('reads names, labels (with escapes) and values, skipping comments', () => {
    const samples = parseMetricsText(page);
    expect(samples).toHaveLength(6);
    expect(samples[3]).toEqual({ name: 'ctrlmesh_proxy_request_duration_seconds_bucket', labels: { le: '+Inf', cluster: 'cluster-a' }, value: 9 });
    expect(samples[4]).toEqual({ name: 'weird', labels: { msg: 'a "quoted", comma\nand newline', x: 'y' }, value: 1 });
    expect(samples[5]).toEqual({ name: 'plain_gauge', labels: {}, value: 3 });
  });

  it('sums one metric by a label', () => {
    expect(sumBy(parseMetricsText(page), 'ctrlmesh_proxy_requests_total', 'cluster')).toEqual(
      new Map([
        ['cluster-a', 9],
        ['cluster-b', 1.5],
      ]),
    );
  });
});
