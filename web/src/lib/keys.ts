// Metric keys as people read them: sections by prefix (train/, val/,
// system/), natural order (layer_2 before layer_10), and MLflow's GPU
// system metrics (system/[node/]gpu_<i>_<field>) gathered into one chart
// per field with a line per GPU.

const collator = new Intl.Collator('en', { numeric: true, sensitivity: 'base' });

/** naturalCompare orders strings with their numbers by value. */
export function naturalCompare(a: string, b: string): number {
  return collator.compare(a, b) || (a < b ? -1 : a > b ? 1 : 0);
}

/** keyPrefix is a key's section: the part before its first '/', or '' for keys without one. */
export function keyPrefix(key: string): string {
  const i = key.indexOf('/');
  return i > 0 ? key.slice(0, i) : '';
}

export interface Section<T> {
  name: string;
  items: T[];
}

/**
 * sections groups items by the prefix of their key: the unprefixed
 * section first, then the others in natural order, system last; items
 * keep the order given.
 */
export function sections<T>(items: readonly T[], keyOf: (t: T) => string): Section<T>[] {
  const by = new Map<string, T[]>();
  for (const it of items) {
    const p = keyPrefix(keyOf(it));
    let list = by.get(p);
    if (!list) by.set(p, (list = []));
    list.push(it);
  }
  const rank = (p: string) => (p === '' ? 0 : p === 'system' ? 2 : 1);
  return [...by.keys()].sort((a, b) => rank(a) - rank(b) || naturalCompare(a, b)).map((name) => ({ name, items: by.get(name)! }));
}

/** A GPU system metric: the node segment ('' for none), the GPU index and the field. */
export interface GpuKey {
  node: string;
  gpu: number;
  field: string;
}

const GPU_KEY = /^system\/(?:([^/]+)\/)?gpu_(\d+)_([^/]+)$/;

/** gpuKey parses system/gpu_0_utilization_percentage and system/node_1/gpu_0_...; null for other keys. */
export function gpuKey(key: string): GpuKey | null {
  const m = GPU_KEY.exec(key);
  return m ? { node: m[1] ?? '', gpu: Number(m[2]), field: m[3] } : null;
}

/** One chart of a run's system metrics: a title and the keys it draws, one line each, with their labels. */
export interface KeyChart {
  id: string;
  title: string;
  keys: { key: string; label: string }[];
}

/**
 * systemCharts turns a run's system/ keys into charts: one per GPU field
 * (and node, for multi-node runs) with a line per GPU, and one per other
 * key. Charts come in natural order of their titles.
 */
export function systemCharts(keys: readonly string[]): KeyChart[] {
  const gpu = new Map<string, KeyChart & { gpus: number[] }>();
  const out: KeyChart[] = [];
  for (const key of keys) {
    const g = gpuKey(key);
    if (!g) {
      out.push({ id: key, title: key, keys: [{ key, label: key }] });
      continue;
    }
    const id = 'system/' + (g.node ? g.node + '/' : '') + 'gpu_*_' + g.field;
    let c = gpu.get(id);
    if (!c) {
      c = { id, title: id, keys: [], gpus: [] };
      gpu.set(id, c);
    }
    c.keys.push({ key, label: (g.node ? g.node + ' ' : '') + 'GPU ' + g.gpu });
    c.gpus.push(g.gpu);
  }
  for (const c of gpu.values()) {
    const order = c.keys.map((k, i) => [k, c.gpus[i]] as const).sort((a, b) => a[1] - b[1]);
    out.push({ id: c.id, title: c.title, keys: order.map(([k]) => k) });
  }
  return out.sort((a, b) => naturalCompare(a.title, b.title));
}
