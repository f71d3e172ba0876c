/**
 * The write the proxy forwards for an object sharded by uid, once it has read the object and judged its uid: the
 * client's body with a precondition the API server checks against the object it writes, so it refuses the write if
 * the name now belongs to another object (deleted and created again meanwhile, in another bucket). Pure: text in,
 * text or refusal out.
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

/** The object as the proxy read and judged it. */
export interface JudgedObject {
  uid: string;
  resourceVersion: string;
}

/**
 * Sets the fields of `judged` in `holder[key]`. A client's own value of one must be the judged one: another uid would
 * name the object the write reaches, not the one judged (another shard's, created under the same name meanwhile),
 * and "" is no precondition at all to the API server; another resourceVersion the API server refuses anyway.
 */
function withFields(holder: Record<string, unknown>, key: string, judged: Partial<JudgedObject>, malformed: string): Refusal | undefined {
  const inner = holder[key] === undefined ? {} : holder[key];
  if (!isObject(inner)) return { code: 400, message: malformed };
  for (const [field, value] of Object.entries(judged)) {
    const own = inner[field];
    if (own !== undefined && own !== null && own !== value) {
      return { code: 409, message: `${key}.${field} ${JSON.stringify(own)} is not the ${field} of the object the proxy judged (${value})` };
    }
  }
  holder[key] = { ...inner, ...judged };
  return undefined;
}

/**
 * An update and a delete carry the uid as a precondition the API server checks on every try. A JSON patch gets a
 * `test` of the uid first, applied to the object the patch reaches. A merge patch's uid is only a field, refused as a
 * change of an immutable one, and a status strategy (a custom resource's) copies the stored metadata over it first:
 * so a merge patch carries the judged resourceVersion too, a precondition on every path (without it a raced merge
 * patch of /status landed on another shard's object: test/integration/proxy-uid-race.test.ts). The price: a merge patch of an object
 * changed since the proxy read it gets 409, as for any client that sends a resourceVersion.
 */
export function withUidPrecondition(verb: 'update' | 'patch' | 'delete', contentType: string | undefined, body: string, judged: JudgedObject): Preconditioned {
  const { uid } = judged;
  const type = mediaType(contentType);
  if (verb === 'delete') {
    if (body.trim() === '') return { body: JSON.stringify({ apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid } }), contentType: JSON_TYPE };
    const options = type === undefined || type === JSON_TYPE ? parse(body) : undefined;
    const malformed = 'the DeleteOptions of an object sharded by uid must be a JSON object';
    if (!isObject(options)) return { code: 400, message: malformed };
    return withFields(options, 'preconditions', { uid }, malformed) ?? { body: JSON.stringify(options), contentType: JSON_TYPE };
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
  return withFields(object, 'metadata', verb === 'patch' ? judged : { uid }, malformed) ?? { body: JSON.stringify(object), contentType: type };
}
