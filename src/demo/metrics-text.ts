/** One sample of the Prometheus text exposition format. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const UNESCAPE: Record<string, string> = { '\\': '\\', '"': '"', n: '\n' };

/** Parses `{a="x",b="y\"z"}` starting at `start` (the brace); returns the labels and the index after `}`. */
function parseLabels(line: string, start: number): { labels: Record<string, string>; end: number } {
  const labels: Record<string, string> = {};
  let i = start + 1;
  while (i < line.length && line[i] !== '}') {
    const eq = line.indexOf('=', i);
    if (eq === -1 || line[eq + 1] !== '"') throw new Error(`malformed labels: ${line}`);
    const key = line.slice(i, eq).trim();
    let value = '';
    let j = eq + 2;
    for (; j < line.length && line[j] !== '"'; j++) {
      if (line[j] === '\\') {
        j++;
        value += UNESCAPE[line[j] as string] ?? line[j];
      } else {
        value += line[j];
      }
    }
    labels[key] = value;
    i = j + 1;
    if (line[i] === ',') i++;
  }
  return { labels, end: i + 1 };
}

/** The samples of a /metrics page (comments and blank lines skipped). */
export function parseMetricsText(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const brace = line.indexOf('{');
    const space = line.indexOf(' ');
    let name: string;
    let labels: Record<string, string> = {};
    let rest: string;
    if (brace !== -1 && (space === -1 || brace < space)) {
      name = line.slice(0, brace);
      const parsed = parseLabels(line, brace);
      labels = parsed.labels;
      rest = line.slice(parsed.end).trim();
    } else {
      name = line.slice(0, space);
      rest = line.slice(space + 1).trim();
    }
    const number = rest.split(' ')[0] ?? '';
    const value = number === '+Inf' ? Infinity : number === '-Inf' ? -Infinity : Number(number);
    samples.push({ name, labels, value });
  }
  return samples;
}

/** Sums the samples of one metric by the value of one label (e.g. requests by cluster). */
export function sumBy(samples: readonly Sample[], name: string, label: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of samples) {
    if (s.name !== name) continue;
    const key = s.labels[label] ?? '';
    out.set(key, (out.get(key) ?? 0) + s.value);
  }
  return out;
}
