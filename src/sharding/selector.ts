import { labelKeyProblem, labelValueProblem, type LabelSelector } from '../api/index.js';
import { SelectorSyntaxError } from '../errors.js';

/**
 * Label selectors with Kubernetes' semantics, in the compiled form the proxy uses on every list/watch: a list of
 * requirements, each with sorted, distinct values. Parsing, merging and rendering avoid regular expressions and
 * intermediate objects beyond what the result needs.
 */
export type SelectorOperator = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';

export interface Requirement {
  readonly key: string;
  readonly operator: SelectorOperator;
  /** Sorted and distinct; empty for Exists and DoesNotExist. */
  readonly values: readonly string[];
}

export type Requirements = readonly Requirement[];

function sortedDistinct(values: readonly string[]): string[] {
  const sorted = [...values].sort();
  let n = 0;
  for (let i = 0; i < sorted.length; i++) if (i === 0 || sorted[i] !== sorted[n - 1]) sorted[n++] = sorted[i] as string;
  sorted.length = n;
  return sorted;
}

/**
 * The query-string text of compiled requirements, made once at compile time: the shard's requirements come back
 * unchanged from most merges, so rendering them on the hot path is a lookup.
 */
const rendered = new WeakMap<Requirement, string>();

/** The compiled form of a metav1.LabelSelector (matchLabels become `In` with one value). */
export function compileSelector(selector: LabelSelector): Requirements {
  const out: Requirement[] = [];
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) out.push({ key, operator: 'In', values: [value] });
  for (const req of selector.matchExpressions ?? []) {
    out.push({ key: req.key, operator: req.operator, values: sortedDistinct(req.values ?? []) });
  }
  for (const req of out) rendered.set(req, renderRequirement(req));
  return out;
}

function requirementMatches(req: Requirement, labels: Readonly<Record<string, string>>): boolean {
  const has = Object.hasOwn(labels, req.key);
  switch (req.operator) {
    case 'Exists':
      return has;
    case 'DoesNotExist':
      return !has;
    case 'In':
      return has && req.values.includes(labels[req.key] as string);
    case 'NotIn':
      // As in Kubernetes: an object without the key satisfies NotIn.
      return !has || !req.values.includes(labels[req.key] as string);
  }
}

/** Whether labels satisfy every requirement; an empty selector matches everything. */
export function matches(selector: LabelSelector | Requirements, labels: Readonly<Record<string, string>>): boolean {
  const reqs = Array.isArray(selector) ? (selector as Requirements) : compileSelector(selector as LabelSelector);
  for (const req of reqs) if (!requirementMatches(req, labels)) return false;
  return true;
}

// Characters that end a key or value in the query-string form, by char code.
const SPECIAL = new Uint8Array(128);
for (const c of ' \t\n\r,=!()<>') SPECIAL[c.charCodeAt(0)] = 1;

class Scanner {
  pos = 0;
  constructor(readonly text: string) {}

  fail(reason: string): never {
    throw new SelectorSyntaxError(this.text, this.pos, reason);
  }

  skipSpace(): void {
    while (this.pos < this.text.length) {
      const c = this.text[this.pos];
      if (c !== ' ' && c !== '\t' && c !== '\n' && c !== '\r') return;
      this.pos++;
    }
  }

  atEnd(): boolean {
    return this.pos >= this.text.length;
  }

  word(): string {
    const start = this.pos;
    while (this.pos < this.text.length) {
      const c = this.text.charCodeAt(this.pos);
      if (c < 128 && SPECIAL[c]) break;
      this.pos++;
    }
    return this.text.slice(start, this.pos);
  }

  key(): string {
    const start = this.pos;
    const key = this.word();
    if (key === '') this.fail('expected a label key');
    const problem = labelKeyProblem(key);
    if (problem) {
      this.pos = start;
      this.fail(problem);
    }
    return key;
  }

  value(): string {
    const start = this.pos;
    const value = this.word();
    const problem = labelValueProblem(value);
    if (problem) {
      this.pos = start;
      this.fail(problem);
    }
    return value;
  }

  /** `(v1, v2)` after `in` / `notin`. */
  valueSet(): string[] {
    this.skipSpace();
    if (this.text[this.pos] !== '(') this.fail('expected "(" to open the set of values');
    this.pos++;
    const values: string[] = [];
    for (;;) {
      this.skipSpace();
      values.push(this.value());
      this.skipSpace();
      const c = this.text[this.pos];
      this.pos++;
      if (c === ')') break;
      if (c !== ',') {
        this.pos--;
        this.fail('expected "," or ")" in the set of values');
      }
    }
    if (values.length === 1 && values[0] === '') this.fail('the set of values must not be empty');
    return values;
  }

  /** The keyword `in` or `notin` followed by a space or `(`. */
  keyword(word: string): boolean {
    if (!this.text.startsWith(word, this.pos)) return false;
    const next = this.text[this.pos + word.length];
    if (next !== undefined && next !== ' ' && next !== '\t' && next !== '(') return false;
    this.pos += word.length;
    return true;
  }

  requirement(): Requirement {
    this.skipSpace();
    if (this.text[this.pos] === '!') {
      this.pos++;
      this.skipSpace();
      return { key: this.key(), operator: 'DoesNotExist', values: [] };
    }
    const key = this.key();
    this.skipSpace();
    const c = this.text[this.pos];
    if (c === undefined || c === ',') return { key, operator: 'Exists', values: [] };
    if (c === '=' || (c === '!' && this.text[this.pos + 1] === '=')) {
      const operator = c === '=' ? 'In' : 'NotIn';
      this.pos += c === '!' || this.text[this.pos + 1] === '=' ? 2 : 1;
      this.skipSpace();
      return { key, operator, values: [this.value()] };
    }
    if (this.keyword('in')) return { key, operator: 'In', values: sortedDistinct(this.valueSet()) };
    if (this.keyword('notin')) return { key, operator: 'NotIn', values: sortedDistinct(this.valueSet()) };
    if (c === '<' || c === '>') this.fail('the numeric comparisons < and > are not supported by ControllerMesh');
    return this.fail('expected "=", "==", "!=", "in", "notin", "," or the end after the key');
  }
}

/**
 * Parses the query-string form the API server accepts: `a=b,a==b,a!=b,k in (x,y),k notin (z),k,!k`.
 * Throws {@link SelectorSyntaxError} naming the position.
 */
export function parseSelector(text: string): Requirements {
  const scanner = new Scanner(text);
  scanner.skipSpace();
  if (scanner.atEnd()) return [];
  const out: Requirement[] = [];
  for (;;) {
    out.push(scanner.requirement());
    scanner.skipSpace();
    if (scanner.atEnd()) return out;
    if (text[scanner.pos] !== ',') scanner.fail('expected "," between requirements');
    scanner.pos++;
  }
}

function renderRequirement(req: Requirement): string {
  switch (req.operator) {
    case 'Exists':
      return req.key;
    case 'DoesNotExist':
      return `!${req.key}`;
    case 'In':
      return req.values.length === 1 ? `${req.key}=${req.values[0]}` : `${req.key} in (${req.values.join(',')})`;
    case 'NotIn':
      return `${req.key} notin (${req.values.join(',')})`;
  }
}

/** The query-string form, e.g. `app=foo,tier in (a,b),!legacy`. */
export function renderSelector(requirements: Requirements): string {
  let out = '';
  for (const req of requirements) {
    const text = rendered.get(req) ?? renderRequirement(req);
    out = out === '' ? text : `${out},${text}`;
  }
  return out;
}

interface KeyState {
  /** The one requirement on this key, while there is only one: it is already reduced, so it is reused as is. */
  only: Requirement | undefined;
  in: readonly string[] | undefined;
  notIn: string[] | undefined;
  exists: boolean;
  doesNotExist: boolean;
}

export interface MergedSelector {
  /** Sorted by key, one requirement per key and operator; `k,!k` for the first key when nothing can match. */
  requirements: Requirements;
  /** True when no object can match (e.g. `k in (a)` AND `k in (b)`): a list can be answered empty at once. */
  matchesNothing: boolean;
}

/** Values of a requirement are sorted and distinct, so filtering one list by another keeps them so. */
function intersect(a: readonly string[], b: readonly string[]): string[] {
  return a.filter((v) => b.includes(v));
}

function addKey(states: Map<string, KeyState>, req: Requirement): void {
  let st = states.get(req.key);
  if (!st) {
    st = { only: req, in: undefined, notIn: undefined, exists: false, doesNotExist: false };
    states.set(req.key, st);
  } else {
    st.only = undefined;
  }
  switch (req.operator) {
    case 'In':
      st.in = st.in === undefined ? req.values : intersect(st.in, req.values);
      break;
    case 'NotIn':
      st.notIn = st.notIn === undefined ? [...req.values] : [...st.notIn, ...req.values];
      break;
    case 'Exists':
      st.exists = true;
      break;
    case 'DoesNotExist':
      st.doesNotExist = true;
      break;
  }
}

/** The requirements one key reduces to, or undefined when they cannot all hold. */
function reduceKey(key: string, st: KeyState): Requirement[] | undefined {
  if (st.only) return [st.only];
  if (st.in !== undefined) {
    if (st.doesNotExist) return undefined;
    const excluded = st.notIn;
    const values = excluded ? st.in.filter((v) => !excluded.includes(v)) : st.in;
    if (values.length === 0) return undefined;
    return [{ key, operator: 'In', values }];
  }
  if (st.doesNotExist) return st.exists ? undefined : [{ key, operator: 'DoesNotExist', values: [] }];
  const out: Requirement[] = [];
  if (st.exists) out.push({ key, operator: 'Exists', values: [] });
  if (st.notIn) out.push({ key, operator: 'NotIn', values: sortedDistinct(st.notIn) });
  return out;
}

/**
 * AND of selectors: the result matches exactly the objects every input matches, so merging the shard's selector
 * with a client's never widens either. Each key is reduced (In sets intersected, NotIn subsumed by In); an empty
 * intersection yields `k,!k`, which the API server accepts and which matches nothing.
 */
export function mergeSelectors(...selectors: Requirements[]): MergedSelector {
  const states = new Map<string, KeyState>();
  for (const selector of selectors) for (const req of selector) addKey(states, req);
  const keys = [...states.keys()].sort();
  const out: Requirement[] = [];
  for (const key of keys) {
    const reduced = reduceKey(key, states.get(key) as KeyState);
    if (!reduced) {
      return {
        requirements: [
          { key, operator: 'Exists', values: [] },
          { key, operator: 'DoesNotExist', values: [] },
        ],
        matchesNothing: true,
      };
    }
    out.push(...reduced);
  }
  return { requirements: out, matchesNothing: false };
}

/**
 * The proxy's hot path: the shard's compiled selector AND the client's `labelSelector` query parameter, rendered
 * back to a query string.
 */
export function mergeQuery(shard: Requirements, clientQuery: string | undefined): { query: string; matchesNothing: boolean } {
  const merged = clientQuery ? mergeSelectors(shard, parseSelector(clientQuery)) : mergeSelectors(shard);
  return { query: renderSelector(merged.requirements), matchesNothing: merged.matchesNothing };
}
