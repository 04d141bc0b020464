// Grouping runs by a param or a tag (params.lr, tags.team): the groups in
// natural order of their values, runs without the key last, as "(none)".

import type { Run } from '../api';
import { naturalCompare } from './keys';

export interface GroupBy {
  kind: 'param' | 'tag';
  key: string;
}

/** parseGroupBy reads "params.lr" or "tags.team" (as in the URL); null for anything else. */
export function parseGroupBy(s: string | null | undefined): GroupBy | null {
  if (!s) return null;
  const m = /^(params|tags)\.(.+)$/.exec(s);
  return m ? { kind: m[1] === 'params' ? 'param' : 'tag', key: m[2] } : null;
}

export function groupByString(g: GroupBy | null): string {
  return g ? (g.kind === 'param' ? 'params.' : 'tags.') + g.key : '';
}

export const NONE = '(none)';

/** groupValue is a run's value of the key grouped by, or NONE. */
export function groupValue(r: Run, g: GroupBy): string {
  const list = g.kind === 'param' ? r.data.params : r.data.tags;
  for (const kv of list) if (kv.key === g.key) return kv.value;
  return NONE;
}

/** groupRuns splits runs by their value of g: groups in natural order of the value, NONE last. */
export function groupRuns<R extends Run>(runs: readonly R[], g: GroupBy): { value: string; runs: R[] }[] {
  const by = new Map<string, R[]>();
  for (const r of runs) {
    const v = groupValue(r, g);
    let list = by.get(v);
    if (!list) by.set(v, (list = []));
    list.push(r);
  }
  return [...by.keys()]
    .sort((a, b) => (a === NONE ? 1 : 0) - (b === NONE ? 1 : 0) || naturalCompare(a, b))
    .map((value) => ({ value, runs: by.get(value)! }));
}
