/**
 * Where an operator's external call goes, read once into the one form the rules judge and the egress proxy sends:
 * hosts lower-cased, IPv4 in dotted form (`127.1`, `2130706433` and `[::ffff:127.0.0.1]` are all `127.0.0.1`),
 * percent-escapes of unreserved characters decoded (`/%61dmin` is `/admin` to every server). A rule then cannot be
 * passed by writing its URL another way, and what was judged is what leaves. Pure: text in, target or refusal out.
 */
export interface EgressTarget {
  /** Lower-case name, dotted IPv4, or IPv6 without brackets. */
  host: string;
  port: number;
}

export interface RequestTarget extends EgressTarget {
  /** The URL sent, as judged (http: only, no fragment). */
  url: URL;
}

export interface Refusal {
  refused: string;
}

const UNRESERVED = /^[A-Za-z0-9\-._~]$/u;

/** RFC 3986 2.3: an escaped unreserved character is that character; every other escape is kept, in upper case. */
function decodeUnreserved(text: string): string {
  return text.replace(/%([0-9A-Fa-f]{2})/gu, (escape, hex: string) => {
    const char = String.fromCharCode(Number.parseInt(hex, 16));
    return UNRESERVED.test(char) ? char : escape.toUpperCase();
  });
}

/**
 * The WHATWG parser's host, canonical: an IPv4-mapped IPv6 address is the IPv4 one, a final dot is dropped. A name
 * with an empty label (`a..b`, `127.0.0.2..`) is refused (''): resolvers and the URL parser read it differently.
 */
function canonicalHost(hostname: string): string {
  const mapped = /^\[::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})\]$/u.exec(hostname);
  if (mapped) {
    const [high, low] = [Number.parseInt(mapped[1]!, 16), Number.parseInt(mapped[2]!, 16)];
    return [high >> 8, high & 255, low >> 8, low & 255].join('.');
  }
  if (hostname.startsWith('[')) return hostname.slice(1, -1);
  const host = hostname.endsWith('.') ? hostname.slice(0, -1) : hostname;
  return host.split('.').includes('') ? '' : host;
}

/** Sets the URL's host; false when the parser reads it as another form, so the form judged would not be the one used. */
function setHost(url: URL, host: string): boolean {
  url.hostname = urlHost(host);
  return canonicalHost(url.hostname) === host;
}

/** A host as a URL writes it (IPv6 in brackets). */
export function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** The target of a plain-http call: an absolute-form request target (`http://host[:port]/path`). */
export function requestTarget(requestUrl: string): RequestTarget | Refusal {
  let url: URL;
  try {
    url = new URL(requestUrl);
  } catch {
    return { refused: 'this is an HTTP proxy: send absolute-form requests (http://host/path)' };
  }
  if (url.protocol !== 'http:') return { refused: `only http: calls are sent as requests, not ${url.protocol} (https goes through CONNECT)` };
  const host = canonicalHost(url.hostname);
  if (host === '' || !setHost(url, host)) return { refused: `the URL's host "${url.hostname}" has an empty label, or no single form` };
  url.pathname = decodeUnreserved(url.pathname);
  url.search = decodeUnreserved(url.search);
  url.hash = '';
  return { url, host, port: url.port === '' ? 80 : Number(url.port) };
}

/** The target of a CONNECT tunnel: its authority-form request target (`host:port`). */
export function connectTarget(requestTarget: string): EgressTarget | Refusal {
  const refused = { refused: `a CONNECT names host:port, not "${requestTarget.slice(0, 100)}"` };
  const match = /^([^/?#@\s[\]:]+|\[[0-9A-Fa-f:.]+\]):(\d{1,5})$/u.exec(requestTarget);
  if (!match) return refused;
  const port = Number(match[2]);
  if (port < 1 || port > 65_535) return refused;
  let url: URL;
  try {
    url = new URL(`http://${match[1]}`);
  } catch {
    return refused;
  }
  const host = canonicalHost(url.hostname);
  return host === '' || !setHost(url, host) ? refused : { host, port };
}
