/**
 * The write the proxy forwards for an object sharded by uid, once it has read the object and judged its uid: the
 * client's body with a uid precondition, so the API server refuses the write if the name now belongs to another
 * object (deleted and created again meanwhile, in another bucket). Pure: text in, text or refusal out.
 */
export type Preconditioned = { body: string; contentType: string } | { code: 400 | 409 | 415; message: string };

const JSON_TYPE = 'application/json';

function mediaType(contentType: string | undefined): string | undefined {
  return contentType?.split(';')[0]?.trim().toLowerCase();
}

function parse(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

type Refusal = Exclude<Preconditioned, { body: string }>;

/**
 * Sets `holder[key].uid` to the judged uid. A client's own uid must be that one: any other would name the object the
 * write reaches, not the one judged (another shard's, created under the same name meanwhile), and "" is no
 * precondition at all to the API server.
 */
function withUid(holder: Record<string, unknown>, key: string, uid: string, malformed: string): Refusal | undefined {
  const inner = holder[key] === undefined ? {} : holder[key];
  if (!isObject(inner)) return { code: 400, message: malformed };
  if (inner.uid !== undefined && inner.uid !== null && inner.uid !== uid) {
    return { code: 409, message: `${key}.uid ${JSON.stringify(inner.uid)} is not the uid of the object the proxy judged (${uid})` };
  }
  holder[key] = { ...inner, uid };
  return undefined;
}

export function withUidPrecondition(verb: 'update' | 'patch' | 'delete', contentType: string | undefined, body: string, uid: string): Preconditioned {
  const type = mediaType(contentType);
  if (verb === 'delete') {
    if (body.trim() === '') return { body: JSON.stringify({ apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid } }), contentType: JSON_TYPE };
    const options = type === undefined || type === JSON_TYPE ? parse(body) : undefined;
    const malformed = 'the DeleteOptions of an object sharded by uid must be a JSON object';
    if (!isObject(options)) return { code: 400, message: malformed };
    return withUid(options, 'preconditions', uid, malformed) ?? { body: JSON.stringify(options), contentType: JSON_TYPE };
  }
  if (type === 'application/json-patch+json' && verb === 'patch') {
    const ops = parse(body);
    if (!Array.isArray(ops)) return { code: 400, message: 'a JSON patch must be an array' };
    return { body: JSON.stringify([{ op: 'test', path: '/metadata/uid', value: uid }, ...ops]), contentType: type };
  }
  const objectTypes = verb === 'update' ? [JSON_TYPE] : ['application/merge-patch+json', 'application/strategic-merge-patch+json'];
  if (type === undefined || !objectTypes.includes(type)) {
    return { code: 415, message: `a ${verb} of an object sharded by uid must be sent as ${[...objectTypes, ...(verb === 'patch' ? ['application/json-patch+json'] : [])].join(' or ')}: the proxy adds the uid it judged` };
  }
  const object = parse(body);
  const malformed = `the body of a ${verb} must be a JSON object whose metadata is an object`;
  if (!isObject(object)) return { code: 400, message: malformed };
  return withUid(object, 'metadata', uid, malformed) ?? { body: JSON.stringify(object), contentType: type };
}
