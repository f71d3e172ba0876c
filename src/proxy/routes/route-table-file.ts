import { readFile } from 'node:fs/promises';
import { FormatRegistry } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { FileError } from '../../errors.js';
import { RouteTableSchema, type RouteTable } from '../../transport/index.js';

// TypeBox knows no string formats until told; the route table's issuedAt is an RFC 3339 date-time.
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;
if (!FormatRegistry.Has('date-time')) FormatRegistry.Set('date-time', (value) => RFC3339.test(value) && !Number.isNaN(Date.parse(value)));

/** Parses and validates a route table; the error names the file and every field at fault. */
export function parseRouteTable(text: string, origin: string): RouteTable {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new FileError(origin, `not JSON (${(err as Error).message}); a route table is the JSON object the hub publishes`, { cause: err });
  }
  if (!Value.Check(RouteTableSchema, value)) {
    const problems = [...Value.Errors(RouteTableSchema, value)].slice(0, 5).map((e) => `${e.path || '/'}: ${e.message}`);
    throw new FileError(origin, `not a valid route table: ${problems.join('; ')}`);
  }
  return value;
}

/** Reads a route table file, or the proxy's stored state (`{ table, contactAt }`), which wraps one. */
export async function readRouteTableFile(path: string): Promise<RouteTable> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new FileError(path, `cannot read the route table (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, { cause: err });
  }
  const wrapped = /^\s*\{\s*"table"\s*:/.test(text);
  return parseRouteTable(wrapped ? JSON.stringify((JSON.parse(text) as { table: unknown }).table) : text, path);
}
