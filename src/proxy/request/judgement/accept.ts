/**
 * The Accept header of a list or watch the proxy reads, as it will send it. The client's header is parsed as the API
 * server parses it (its negotiation, goautoneg: split on `,` then `;`, spaces trimmed around each part and around
 * `=`, a parameter without `=` ignored, the last of a repeated one kept), and only what the proxy judged is sent:
 * the JSON media ranges, each with the parameters that choose the answer's kind (`as`, `g`, `v`). A client's
 * `as= Table` is then a Table to both, never a Table to the API server alone.
 */
export interface JsonAccept {
  /** The header sent: the client's JSON ranges rendered again, or plain JSON when it asked for none. */
  accept: string;
  /** Whether some range asks for a Table (`kubectl get`): its rows must then carry their objects' metadata. */
  table: boolean;
}

const JSON_TYPE = 'application/json';
/** The parameters that decide what the API server answers with (apimachinery's `acceptMediaTypeOptions`). */
const KIND_PARAMETERS = ['as', 'g', 'v'] as const;

/** Spaces only, as goautoneg trims: a tab stays part of the value, on both sides of the proxy. */
function trimSpaces(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && text[start] === ' ') start++;
  while (end > start && text[end - 1] === ' ') end--;
  return text.slice(start, end);
}

export function jsonAccept(header: string | undefined): JsonAccept {
  const ranges: string[] = [];
  let table = false;
  for (const clause of (header ?? '').split(',')) {
    const [range = '', ...parameters] = trimSpaces(clause).split(';');
    const [type, subtype, extra] = range.split('/').map(trimSpaces);
    // Any case: the API server takes only `application/json`, which is what is sent for it.
    if (extra !== undefined || `${type}/${subtype}`.toLowerCase() !== JSON_TYPE) continue;
    const values = new Map<string, string>();
    for (const parameter of parameters) {
      const at = parameter.indexOf('=');
      if (at >= 0) values.set(trimSpaces(parameter.slice(0, at)), trimSpaces(parameter.slice(at + 1)));
    }
    const kept = KIND_PARAMETERS.flatMap((key) => {
      const value = values.get(key);
      return value === undefined ? [] : [`;${key}=${value}`];
    });
    if (values.get('as') === 'Table') table = true;
    ranges.push(`${JSON_TYPE}${kept.join('')}`);
  }
  return { accept: ranges.length > 0 ? [...new Set(ranges)].join(',') : JSON_TYPE, table };
}
