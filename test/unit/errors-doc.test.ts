import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/errors.js';

// Users match on codes; docs/errors.md is where they look them up, so the two must not drift apart.
describe('docs/errors.md', () => {
  const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
  const documented = new Set([...doc.matchAll(/`(CM_[A-Z_]+)`/g)].map((m) => m[1]));

  it('lists every error code the code raises', () => {
    expect(Object.values(ErrorCodes).filter((code) => !documented.has(code))).toEqual([]);
  });

  it('lists no code that no longer exists', () => {
    const known = new Set<string>(Object.values(ErrorCodes));
    expect([...documented].filter((code) => code !== undefined && !known.has(code))).toEqual([]);
  });
});
