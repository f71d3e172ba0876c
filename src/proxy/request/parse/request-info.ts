import { goBool, type QueryParams } from './query.js';

/**
 * What a Kubernetes API request is about, read from its method, decoded path segments and query the way the
 * API server's RequestInfoFactory reads them: the verb, the resource and the namespace it executes in.
 */
export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection';

export interface ResourceRequest {
  kind: 'resource';
  verb: Verb;
  /** '' for the core group. */
  group: string;
  version: string;
  resource: string;
  subresource: string | undefined;
  /** For a Namespace object, its own name (as the API server's RequestInfo has it). */
  namespace: string | undefined;
  name: string | undefined;
}

/** Discovery, /version, /openapi, health endpoints: read-only, about no object. */
export interface NonResourceRequest {
  kind: 'nonresource';
}

export type RequestInfo = ResourceRequest | NonResourceRequest;

/** Why a request cannot be judged: answered with this code and message, never forwarded. */
export interface Refusal {
  code: 400 | 403 | 404 | 405;
  message: string;
}

export interface Classified {
  info: RequestInfo;
  /** The segments to forward (the request rewritten to the form judged, e.g. a named watch as a collection watch). */
  segments: string[];
}

const NON_RESOURCE_ROOTS = new Set(['version', 'healthz', 'livez', 'readyz', 'openapi', 'metrics', '.well-known', 'openid']);
/** Parts after `namespaces/<ns>` that are subresources of the Namespace object, not resources inside it. */
const NAMESPACE_SUBRESOURCES = new Set(['status', 'finalize']);
/** The subresource whose further segments are a path on the pod's or service's own server. */
export const PROXY_SUBRESOURCE = 'proxy';

const NAMESPACE_RESOURCE = (group: string, resource: string): boolean => group === '' && resource === 'namespaces';

function verbOf(method: string, named: boolean): Verb | undefined {
  switch (method) {
    case 'GET':
    case 'HEAD':
      return 'get';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return named ? 'delete' : 'deletecollection';
    default:
      return undefined;
  }
}

function methodNotAllowed(method: string): Refusal {
  return { code: 405, message: `method ${method} is not served through the proxy` };
}

/**
 * Classifies a request by its decoded segments (cluster prefix removed). `query` may be changed: a watch of one
 * named object becomes a watch of its collection with `fieldSelector=metadata.name=<name>`, so it is judged and
 * filtered like every other watch.
 */
export function classify(method: string, segments: readonly string[], query: QueryParams): Classified | Refusal {
  const [root] = segments;
  const api = root === 'api' ? 2 : root === 'apis' ? 3 : 0;
  if (api === 0 || segments.length <= api) {
    // Only discovery and the server's read-only endpoints, never another path the API server might serve.
    const known = root === undefined || root === 'api' || root === 'apis' || NON_RESOURCE_ROOTS.has(root);
    if (!known) return { code: 404, message: `the path /${segments.join('/')} is not served through the proxy: only the Kubernetes API, discovery, /version, /openapi and health paths are` };
    if (method !== 'GET' && method !== 'HEAD') return methodNotAllowed(method);
    return { info: { kind: 'nonresource' }, segments: [...segments] };
  }
  const group = root === 'api' ? '' : segments[1]!;
  const version = segments[api - 1]!;
  const prefix = segments.slice(0, api);
  let parts = segments.slice(api);
  let legacyWatch = false;
  if (parts[0] === 'proxy') return { code: 404, message: 'the /proxy/ path prefix is not served through the proxy: use the pods/<name>/proxy or services/<name>/proxy subresource' };
  if (parts[0] === 'watch') {
    legacyWatch = true;
    parts = parts.slice(1);
    if (parts.length === 0) return { code: 404, message: 'a /watch/ path must name a resource' };
  }
  let namespace: string | undefined;
  let scope: string[] = [];
  if (parts[0] === 'namespaces' && parts.length > 1) {
    namespace = parts[1]!;
    if (parts.length > 2 && !NAMESPACE_SUBRESOURCES.has(parts[2]!)) {
      scope = parts.slice(0, 2);
      parts = parts.slice(2);
    }
  }
  const [resource, name, subresource] = parts as [string, string | undefined, string | undefined];
  if (parts.length > 3 && subresource !== PROXY_SUBRESOURCE) {
    return { code: 404, message: `the path /${segments.join('/')} has segments after its subresource: not a Kubernetes API path` };
  }
  if (subresource === PROXY_SUBRESOURCE && namespace === undefined) {
    return { code: 403, message: `${resource}/proxy reaches servers that serve every namespace: refused through the proxy` };
  }
  const named = name !== undefined;
  let verb = verbOf(method, named);
  if (verb === undefined) return methodNotAllowed(method);
  if (NAMESPACE_RESOURCE(group, resource) && named) namespace = name;

  if (verb === 'get') {
    const watch = legacyWatch || goBool(query.get('watch'));
    if (watch === undefined) return { code: 400, message: 'the watch parameter must be true, false, 1 or 0' };
    if (watch && named) {
      if (subresource !== undefined) return { code: 400, message: `a watch of the ${subresource} subresource is not a Kubernetes API request` };
      // The API server would serve this as a plain GET (or, under /watch/, a watch of one object): ask for the
      // collection watch that means the same, judged and filtered like every watch.
      if (query.get('fieldSelector') !== undefined) return { code: 400, message: 'a watch of a named object cannot also carry a fieldSelector: watch the collection with fieldSelector=metadata.name=<name>' };
      query.set('fieldSelector', `metadata.name=${name}`);
    }
    if (watch) query.set('watch', 'true');
    if (!named || watch) verb = watch ? 'watch' : 'list';
  } else if (legacyWatch) {
    return methodNotAllowed(method);
  }
  if (verb === 'watch' || verb === 'list') {
    const forwarded = [...prefix, ...scope, resource];
    if (NAMESPACE_RESOURCE(group, resource)) namespace = undefined;
    return { info: { kind: 'resource', verb, group, version, resource, subresource: undefined, namespace, name: undefined }, segments: forwarded };
  }
  return {
    info: { kind: 'resource', verb, group, version, resource, subresource, namespace, name },
    segments: [...prefix, ...scope, ...parts],
  };
}

/** True for verbs that change state. */
export function isWrite(verb: Verb): boolean {
  return verb === 'create' || verb === 'update' || verb === 'patch' || verb === 'delete' || verb === 'deletecollection';
}
