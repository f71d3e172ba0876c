/**
 * Percent-decoding as the API server (Go's net/url) does it, but strict: where Go would answer 400, drop a query
 * pair or read bytes that are not UTF-8, this returns undefined, so the proxy refuses instead of guessing.
 */

const HEX = /^[0-9A-Fa-f]{2}$/;

/** Decodes `%XX` escapes (and `+` as a space in a query); undefined for a bad escape or invalid UTF-8. */
export function percentDecode(raw: string, query: boolean): string | undefined {
  const text = query && raw.includes('+') ? raw.replaceAll('+', ' ') : raw;
  if (!text.includes('%')) return text;
  for (let i = text.indexOf('%'); i >= 0; i = text.indexOf('%', i + 1)) {
    if (!HEX.test(text.slice(i + 1, i + 3))) return undefined;
  }
  try {
    return decodeURIComponent(text);
  } catch {
    // URIError: the escapes spell bytes that are not UTF-8.
    return undefined;
  }
}

/** Characters a path segment may carry unescaped (RFC 3986 pchar); everything else is escaped as UTF-8. */
const PCHAR = "A-Za-z0-9\\-._~!$&'()*+,;=:@";
const SEGMENT_UNSAFE = new RegExp(`[^${PCHAR}]`, 'u');
const SEGMENT_UNSAFE_ALL = new RegExp(SEGMENT_UNSAFE.source, 'gu');
const PCHAR_PATH = new RegExp(`^[${PCHAR}/]*$`, 'u');

/** True when every segment of `path` is pchar text, so encodeSegment would return each one as it is. */
export function isCanonicalPath(path: string): boolean {
  return PCHAR_PATH.test(path);
}

/** A decoded path segment in the form the proxy forwards; the API server decodes it back to the same text. */
export function encodeSegment(segment: string): string {
  return SEGMENT_UNSAFE.test(segment) ? segment.replace(SEGMENT_UNSAFE_ALL, (c) => encodeURIComponent(c)) : segment;
}
