/**
 * What a Kubernetes API request is about, read from its method, path and query the way the API server's own
 * RequestInfoFactory reads them: the verb, the resource and, for namespaced objects, the namespace.
 */
export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection' | 'proxy';

export interface ResourceRequest {
  kind: 'resource';
  verb: Verb;
  /** '' for the core group. */
  group: string;
  version: string;
  resource: string;
  subresource: string | undefined;
  namespace: string | undefined;
  name: string | undefined;
}

/** Discovery, /version, /openapi, health endpoints: passed through untouched. */
export interface NonResourceRequest {
  kind: 'nonresource';
}

export type RequestInfo = ResourceRequest | NonResourceRequest;

const NON_RESOURCE: NonResourceRequest = { kind: 'nonresource' };

function isWatchQuery(query: URLSearchParams): boolean {
  const watch = query.get('watch');
  return watch === 'true' || watch === '1';
}

function verbFor(method: string, hasName: boolean, query: URLSearchParams): Verb | undefined {
  switch (method) {
    case 'GET':
    case 'HEAD':
      if (hasName) return 'get';
      return isWatchQuery(query) ? 'watch' : 'list';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return hasName ? 'delete' : 'deletecollection';
    default:
      return undefined;
  }
}

/** Parses `path` (no query, no cluster prefix); `query` is the request's query string. */
export function parseRequestInfo(method: string, path: string, query: URLSearchParams): RequestInfo {
  const segments = path.split('/').filter((s) => s !== '');
  let rest: string[];
  let group: string;
  let version: string;
  if (segments[0] === 'api' && segments.length >= 3) {
    group = '';
    version = segments[1]!;
    rest = segments.slice(2);
  } else if (segments[0] === 'apis' && segments.length >= 4) {
    group = segments[1]!;
    version = segments[2]!;
    rest = segments.slice(3);
  } else {
    return NON_RESOURCE;
  }
  // Legacy /watch/ prefix: /api/v1/watch/namespaces/ns/pods
  let legacyWatch = false;
  if (rest[0] === 'watch') {
    legacyWatch = true;
    rest = rest.slice(1);
  }
  let namespace: string | undefined;
  // `namespaces/<ns>/<resource>...` is namespaced; `namespaces[/<name>[/sub]]` is the Namespace object itself.
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [resource, name, subresource] = rest;
  if (resource === undefined || rest.length > 3) return NON_RESOURCE;
  const hasName = name !== undefined;
  let verb = legacyWatch ? 'watch' : verbFor(method, hasName, query);
  if (verb === undefined) return NON_RESOURCE;
  if (verb === 'get' && isWatchQuery(query)) verb = 'watch';
  if (subresource === 'proxy') verb = 'proxy';
  // The Namespace object itself is cluster-scoped, but its name is also its namespace.
  if (resource === 'namespaces' && group === '' && hasName) namespace = undefined;
  return { kind: 'resource', verb, group, version, resource, subresource, namespace, name };
}

/** True for verbs that change state. */
export function isWrite(verb: Verb): boolean {
  return verb === 'create' || verb === 'update' || verb === 'patch' || verb === 'delete' || verb === 'deletecollection';
}
