import { encodeSegment, isCanonicalPath, percentDecode } from './percent.js';
import { QueryParams } from './query.js';
import { PROXY_SUBRESOURCE, classify, type Refusal, type RequestInfo } from './request-info.js';

/** One request as the proxy judged it: everything forwarded comes from here, never from the client's text. */
export interface ApiRequest {
  /** From a `/clusters/<name>/` prefix; undefined = the home cluster. */
  cluster: string | undefined;
  info: RequestInfo;
  /** The path to send to the API server: canonical, percent-encoded, without the cluster prefix. */
  path: string;
  /** The decoded parameters; the proxy may add to them (the shard's selector) before forwarding. */
  query: QueryParams;
}

const CLUSTERS = 'clusters';
/** Parameters the proxy reads or rewrites: one value each, so there is no question which one the API server reads. */
const JUDGED_PARAMETERS = ['watch', 'labelSelector', 'fieldSelector'] as const;
/** Printable ASCII: Node's parser admits other bytes in a request target; the proxy does not guess at them. */
const PRINTABLE = /^[\x21-\x7e]*$/u;
// Decoded control characters have no place in a name and could end a line in a log or a header.
const CONTROL = /[\x00-\x1f\x7f]/u;

/**
 * Reads a request target the way the API server will: the path decoded segment by segment, the query as Go parses
 * it. Whatever the API server could read differently from the proxy is refused (400): an encoded `/` inside a
 * segment, empty, `.` or `..` segments, bad escapes, `;` in the query, a fragment, an absolute URL.
 */
export function parseApiRequest(method: string, target: string): ApiRequest | Refusal {
  if (!target.startsWith('/') || !PRINTABLE.test(target) || target.includes('#')) {
    return { code: 400, message: 'the request target must be a path (no absolute URL, fragment, spaces or non-ASCII bytes)' };
  }
  const q = target.indexOf('?');
  const rawPath = q < 0 ? target : target.slice(0, q);
  const query = QueryParams.parse(q < 0 ? '' : target.slice(q + 1));
  if (query === undefined) return { code: 400, message: 'the query has a bad %-escape or a ";" (which the API server would not read as the proxy does)' };
  for (const key of JUDGED_PARAMETERS) {
    if (query.count(key) > 1) return { code: 400, message: `the ${key} parameter is given more than once` };
  }
  // A trailing `/` is part of a path on a pod's or service's own server (the proxy subresource), nowhere else.
  const trailingSlash = rawPath.length > 1 && rawPath.endsWith('/');
  const segments = rawPath === '/' ? [] : rawPath.slice(1, trailingSlash ? -1 : undefined).split('/');
  const encoded = rawPath.includes('%');
  for (let i = 0; i < segments.length; i++) {
    const raw = segments[i]!;
    const segment = encoded ? percentDecode(raw, false) : raw;
    if (segment === undefined) return { code: 400, message: `path segment "${raw}" has a bad %-escape` };
    // Unencoded, a segment is printable text split at "/": only a decoded one can hold "/" or a control character.
    if (segment === '' || segment === '.' || segment === '..' || (encoded && (segment.includes('/') || CONTROL.test(segment)))) {
      return { code: 400, message: `path segment "${raw}" is empty, a dot segment, or encodes "/" or a control character: the API server could read it differently` };
    }
    segments[i] = segment;
  }
  let cluster: string | undefined;
  let rest = segments;
  if (segments[0] === CLUSTERS && segments.length >= 2) {
    cluster = segments[1];
    rest = segments.slice(2);
  }
  const classified = classify(method, rest, query);
  if ('code' in classified) return classified;
  const { info } = classified;
  if (trailingSlash && !(info.kind === 'resource' && info.subresource === PROXY_SUBRESOURCE)) {
    return { code: 400, message: 'the path ends with "/": only a pods or services proxy path may' };
  }
  // Every segment forwarded is one of the request's: unencoded pchar text is its own encoding.
  const forwarded = encoded || !isCanonicalPath(rawPath) ? classified.segments.map(encodeSegment) : classified.segments;
  const path = `/${forwarded.join('/')}${trailingSlash ? '/' : ''}`;
  return { cluster, info, path, query };
}

export function isRefusal(parsed: ApiRequest | Refusal): parsed is Refusal {
  return 'code' in parsed;
}
