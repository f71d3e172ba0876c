/** One thing wrong in a manifest: the field path as users write it (`spec.limits[0].selector`) and why. */
export interface FieldProblem {
  path: string;
  reason: string;
}

/** `/spec/limits/0/selector` (a JSON pointer, as TypeBox reports) -> `spec.limits[0].selector`. */
export function pointerToPath(pointer: string): string {
  let out = '';
  for (const raw of pointer.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (/^\d+$/.test(part)) out += `[${part}]`;
    else if (/^[A-Za-z_$][\w$]*$/.test(part)) out += out === '' ? part : `.${part}`;
    else out += `[${JSON.stringify(part)}]`;
  }
  return out;
}

/** Joins a parent path and a child field name or index. */
export function childPath(parent: string, child: string | number): string {
  if (typeof child === 'number') return `${parent}[${child}]`;
  return parent === '' ? child : `${parent}.${child}`;
}

/** Rules are addressed by name (metrics, status snapshots), so a list must not repeat one. */
export function duplicateNames(items: readonly { name?: string }[], path: string): FieldProblem[] {
  const seen = new Set<string>();
  const problems: FieldProblem[] = [];
  items.forEach((item, i) => {
    if (item.name === undefined) return;
    if (seen.has(item.name)) problems.push({ path: `${path}[${i}].name`, reason: `name "${item.name}" is used twice in this list` });
    seen.add(item.name);
  });
  return problems;
}
