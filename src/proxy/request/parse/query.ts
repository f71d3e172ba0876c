import { percentDecode } from './percent.js';

/**
 * A request's query parameters in order, decoded the way the API server's url.ParseQuery decodes them. The proxy
 * forwards `toString()`, never the client's text, so the parameters it judged are the parameters that execute.
 */
export class QueryParams {
  private constructor(private readonly pairs: [string, string][]) {}

  /** Undefined when Go would read the text differently: a `;` (Go drops such pairs) or a bad escape. */
  static parse(raw: string): QueryParams | undefined {
    const pairs: [string, string][] = [];
    if (raw === '') return new QueryParams(pairs);
    if (raw.includes(';')) return undefined;
    for (const piece of raw.split('&')) {
      if (piece === '') continue;
      const eq = piece.indexOf('=');
      const key = percentDecode(eq < 0 ? piece : piece.slice(0, eq), true);
      const value = eq < 0 ? '' : percentDecode(piece.slice(eq + 1), true);
      if (key === undefined || value === undefined) return undefined;
      pairs.push([key, value]);
    }
    return new QueryParams(pairs);
  }

  /** The first value, as the API server reads a single-valued parameter. */
  get(key: string): string | undefined {
    return this.pairs.find(([k]) => k === key)?.[1];
  }

  count(key: string): number {
    let n = 0;
    for (const [k] of this.pairs) if (k === key) n++;
    return n;
  }

  /** Replaces every value of `key` by one, in the place of the first. */
  set(key: string, value: string): void {
    const at = this.pairs.findIndex(([k]) => k === key);
    if (at < 0) {
      this.pairs.push([key, value]);
      return;
    }
    this.pairs[at] = [key, value];
    for (let i = this.pairs.length - 1; i > at; i--) if (this.pairs[i]![0] === key) this.pairs.splice(i, 1);
  }

  delete(key: string): void {
    for (let i = this.pairs.length - 1; i >= 0; i--) if (this.pairs[i]![0] === key) this.pairs.splice(i, 1);
  }

  toString(): string {
    return this.pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
  }
}

/**
 * A boolean parameter as the API server converts it (apimachinery's Convert_Slice_string_To_bool): absent,
 * `0` or `false` in any case is false; anything else, the empty string included, is true. Undefined for a value
 * outside ASCII, where Go's Unicode case folding (`falſe` is `false` to it) could disagree with JavaScript's.
 */
export function goBool(value: string | undefined): boolean | undefined {
  if (value === undefined) return false;
  if (!/^[\x20-\x7e]*$/u.test(value)) return undefined;
  return value !== '0' && value.toLowerCase() !== 'false';
}
