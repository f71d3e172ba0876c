import { Kind, type TSchema } from '@sinclair/typebox';
import { Value, ValueErrorType, type ValueError } from '@sinclair/typebox/value';
import { pointerToPath, type FieldProblem } from './field-problem.js';
import { API_GROUP, KINDS, type ManifestModel } from './kinds.js';
import { DURATION_PATTERN } from './duration.js';
import { INT_OR_STRING } from './schema-types.js';

export interface ValidateOptions {
  /** Bucket numbers must be below it (default 32, as KusionStack). */
  bucketCount?: number;
}

export type ValidationResult =
  | { ok: true; model: ManifestModel }
  | { ok: false; kind: string; name: string; problems: FieldProblem[] };

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${JSON.stringify(value)}`;
}

const TYPE_NAMES: Partial<Record<ValueErrorType, string>> = {
  [ValueErrorType.String]: 'a string',
  [ValueErrorType.Integer]: 'an integer',
  [ValueErrorType.Number]: 'a number',
  [ValueErrorType.Boolean]: 'a boolean (true or false)',
  [ValueErrorType.Array]: 'a list',
  [ValueErrorType.Object]: 'an object',
};

/** Turns a TypeBox error into a sentence a user can act on. */
function reasonOf(error: ValueError): string {
  const schema = error.schema as TSchema & Record<string, unknown>;
  switch (error.type) {
    case ValueErrorType.ObjectRequiredProperty:
      return 'is required';
    case ValueErrorType.ObjectAdditionalProperties:
      return `unknown field; allowed here: ${Object.keys((schema.properties as object | undefined) ?? {}).join(', ')}`;
    case ValueErrorType.Union: {
      if (schema[INT_OR_STRING]) return `must be an integer or a numeric string, not ${describe(error.value)}`;
      const options = (schema.anyOf as TSchema[]).map((s) => (s as { const?: unknown }).const);
      return `must be one of ${options.join(', ')}, not ${describe(error.value)}`;
    }
    case ValueErrorType.Literal:
      return `must be ${JSON.stringify((schema as { const?: unknown }).const)}, not ${describe(error.value)}`;
    case ValueErrorType.StringPattern:
      return schema.pattern === DURATION_PATTERN
        ? `must be a duration such as 200ms, 30s, 5m or 1h, not ${describe(error.value)}`
        : `must match ${String(schema.pattern)}, not ${describe(error.value)}`;
    case ValueErrorType.StringMinLength:
      return schema.minLength === 1 ? 'must not be empty' : `must be at least ${String(schema.minLength)} characters long, not ${describe(error.value)}`;
    case ValueErrorType.IntegerMinimum:
    case ValueErrorType.IntegerMaximum:
    case ValueErrorType.NumberMinimum:
    case ValueErrorType.NumberMaximum:
      return `must be ${schema.minimum !== undefined ? `at least ${String(schema.minimum)}` : ''}${schema.minimum !== undefined && schema.maximum !== undefined ? ' and ' : ''}${schema.maximum !== undefined ? `at most ${String(schema.maximum)}` : ''}, not ${describe(error.value)}`;
    default: {
      const name = TYPE_NAMES[error.type];
      if (name) return `must be ${name}, not ${describe(error.value)}`;
      return `${error.message.charAt(0).toLowerCase()}${error.message.slice(1)} (${schema[Kind] ?? 'value'})`;
    }
  }
}

/** Every shape error, one per field (a missing field is reported as missing, not also as of the wrong type). */
export function schemaProblems(schema: TSchema, doc: unknown): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const seen = new Set<string>();
  for (const error of Value.Errors(schema, doc)) {
    const path = pointerToPath(error.path) || '(document)';
    if (seen.has(path)) continue;
    seen.add(path);
    problems.push({ path, reason: reasonOf(error) });
  }
  return problems;
}

function field(doc: unknown, name: string): unknown {
  return typeof doc === 'object' && doc !== null ? (doc as Record<string, unknown>)[name] : undefined;
}

/**
 * Validates one manifest of a ControllerMesh kind and normalises it. Every problem is reported at once, each with
 * its field path, so one run of `ctrlmesh validate` shows everything to fix.
 */
export function validateManifest(doc: unknown, options: ValidateOptions = {}): ValidationResult {
  const bucketCount = options.bucketCount ?? 32;
  const kindName = field(doc, 'kind');
  const metadata = field(doc, 'metadata');
  const name = typeof field(metadata, 'name') === 'string' ? (field(metadata, 'name') as string) : '(unnamed)';
  const kind = KINDS.find((k) => k.kind === kindName);
  if (!kind) {
    return {
      ok: false,
      kind: typeof kindName === 'string' ? kindName : '(no kind)',
      name,
      problems: [{ path: 'kind', reason: `must be one of ${KINDS.map((k) => k.kind).join(', ')}, not ${describe(kindName)}` }],
    };
  }
  const problems = schemaProblems(kind.manifest, doc);
  if (problems.length === 0) {
    problems.push(...kind.problems(field(doc, 'spec'), { bucketCount }));
  }
  if (problems.length > 0) return { ok: false, kind: kind.kind, name, problems };
  return { ok: true, model: kind.normalize(metadata as { name: string; namespace?: string }, field(doc, 'spec')) };
}

export interface DocumentReport {
  kind: string;
  name: string;
  problems: FieldProblem[];
}

/**
 * Validates the documents of one file. Empty documents are skipped, and so are documents of other API groups
 * (a file may hold a whole release); their count is returned so the caller can say so.
 */
export function validateDocuments(docs: readonly unknown[], options: ValidateOptions = {}): { reports: DocumentReport[]; skipped: number } {
  const reports: DocumentReport[] = [];
  let skipped = 0;
  for (const doc of docs) {
    if (doc === null || doc === undefined) continue;
    const apiVersion = field(doc, 'apiVersion');
    if (typeof apiVersion === 'string' && !apiVersion.startsWith(`${API_GROUP}/`)) {
      skipped++;
      continue;
    }
    const result = validateManifest(doc, options);
    reports.push(
      result.ok
        ? { kind: result.model.kind, name: result.model.name, problems: [] }
        : { kind: result.kind, name: result.name, problems: result.problems },
    );
  }
  return { reports, skipped };
}

/** `FILE: Kind/name: field.path: reason`, the lines `ctrlmesh validate` prints for a document. */
export function formatProblems(file: string, report: DocumentReport): string[] {
  return report.problems.map((problem) => `${file}: ${report.kind}/${report.name}: ${problem.path}: ${problem.reason}`);
}
