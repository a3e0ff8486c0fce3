/**
 * What changed between two policy documents, one line per path, for the audit trail: `+ rules[flush]` (added),
 * `- budgets[monthly]` (removed), `~ controls.maxFleetSize: 16 -> 8` (changed). Lists of objects with an `id`
 * (rules, budgets) are compared by id, so reordering is not a change of every rule.
 */

/** Lines beyond this are summarised (`… and 12 more changes`). */
export const MAX_DIFF_LINES = 50;

type Json = unknown;

function short(v: Json): string {
  const text = JSON.stringify(v) ?? 'undefined';
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

const isObject = (v: Json): v is Record<string, Json> => !!v && typeof v === 'object' && !Array.isArray(v);
const withIds = (v: Json): v is Array<{ id: string }> =>
  Array.isArray(v) && v.every((x) => isObject(x) && typeof x.id === 'string');

function walk(a: Json, b: Json, path: string, out: string[]): void {
  if (JSON.stringify(a) === JSON.stringify(b)) return;
  if (a === undefined) return void out.push(`+ ${path}`);
  if (b === undefined) return void out.push(`- ${path}`);
  if (withIds(a) && withIds(b)) {
    const before = new Map(a.map((x) => [x.id, x]));
    const after = new Map(b.map((x) => [x.id, x]));
    for (const id of before.keys()) if (!after.has(id)) out.push(`- ${path}[${id}]`);
    for (const [id, x] of after) {
      const old = before.get(id);
      if (!old) out.push(`+ ${path}[${id}]`);
      else walk(old, x, `${path}[${id}]`, out);
    }
    return;
  }
  if (isObject(a) && isObject(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) walk(a[k], b[k], path ? `${path}.${k}` : k, out);
    return;
  }
  out.push(`~ ${path || '(document)'}: ${short(a)} -> ${short(b)}`);
}

export function policyDiff(before: Json, after: Json): string[] {
  const out: string[] = [];
  walk(before, after, '', out);
  if (out.length <= MAX_DIFF_LINES) return out;
  return [...out.slice(0, MAX_DIFF_LINES - 1), `... and ${out.length - MAX_DIFF_LINES + 1} more changes`];
}
