// Metric points as the charts hold them: merging a zoomed range into an
// overview, min/max envelopes, and aligning many runs on one x axis (what
// uPlot draws).

/** A metric point: step, timestamp (ms) and value (NaN for "NaN"). */
export interface Point {
  step: number;
  ts: number;
  value: number;
}

/**
 * mergeRange replaces the points of base (sorted by step) whose step lies
 * in [start, end] by detail (the same range fetched at full resolution,
 * sorted by step) and returns a new array sorted by step. Base points
 * outside the range are kept, so zooming in never loses the overview.
 */
export function mergeRange(base: readonly Point[], detail: readonly Point[], start: number, end: number): Point[] {
  const out: Point[] = [];
  let i = 0;
  while (i < base.length && base[i].step < start) out.push(base[i++]);
  for (const p of detail) if (p.step >= start && p.step <= end) out.push(p);
  while (i < base.length && base[i].step <= end) i++;
  while (i < base.length) out.push(base[i++]);
  return out;
}

/**
 * envelope cuts xs (ascending) into `buckets` equal ranges and returns,
 * for every point, the lowest and highest finite y of its bucket: the
 * min/max band drawn behind a smoothed line, so that a spike is never
 * hidden. Points with a missing or non-finite y get null.
 */
export function envelope(
  xs: ArrayLike<number>,
  ys: ArrayLike<number | null>,
  buckets: number,
): { lo: (number | null)[]; hi: (number | null)[] } {
  const n = xs.length;
  const lo: (number | null)[] = new Array(n).fill(null);
  const hi: (number | null)[] = new Array(n).fill(null);
  if (n === 0) return { lo, hi };
  const x0 = xs[0];
  const span = xs[n - 1] - x0;
  const b = Math.max(1, Math.floor(buckets));
  let i = 0;
  while (i < n) {
    const k = span > 0 ? Math.min(b - 1, Math.floor(((xs[i] - x0) / span) * b)) : 0;
    let j = i;
    let mn = Infinity;
    let mx = -Infinity;
    while (j < n) {
      const kj = span > 0 ? Math.min(b - 1, Math.floor(((xs[j] - x0) / span) * b)) : 0;
      if (kj !== k) break;
      const y = ys[j];
      if (y != null && Number.isFinite(y)) {
        if (y < mn) mn = y;
        if (y > mx) mx = y;
      }
      j++;
    }
    for (let t = i; t < j; t++) {
      const y = ys[t];
      if (y != null && Number.isFinite(y) && mn <= mx) {
        lo[t] = mn;
        hi[t] = mx;
      }
    }
    i = j;
  }
  return { lo, hi };
}

/** One run's series before alignment: ascending xs and their ys. */
export interface XY {
  xs: ArrayLike<number>;
  ys: ArrayLike<number | null>;
}

/**
 * align puts several series on one ascending x axis, as uPlot wants: it
 * returns [xs, ys0, ys1, ...] where ysK[i] is series K's value at xs[i] or
 * null where it has none. When a series has several values at one x, the
 * first is kept (callers draw envelopes from the unaligned points, so no
 * extreme is lost). When every series has the same xs, they are reused.
 */
export function align(series: readonly XY[]): [number[], ...(number | null)[][]] {
  if (series.length === 0) return [[]];
  const same = series.every((s) => sameXs(s.xs, series[0].xs) && strictlyAscending(s.xs));
  if (same) {
    const xs = Array.from(series[0].xs);
    return [xs, ...series.map((s) => Array.from(s.ys))];
  }
  let total = 0;
  for (const s of series) total += s.xs.length;
  const all = new Float64Array(total);
  let k = 0;
  for (const s of series) for (let i = 0; i < s.xs.length; i++) all[k++] = s.xs[i];
  all.sort();
  const xs: number[] = [];
  for (let i = 0; i < all.length; i++) if (i === 0 || all[i] !== all[i - 1]) xs.push(all[i]);
  const out: [number[], ...(number | null)[][]] = [xs];
  for (const s of series) {
    const ys: (number | null)[] = new Array(xs.length).fill(null);
    let j = 0;
    for (let i = 0; i < s.xs.length; i++) {
      const x = s.xs[i];
      while (xs[j] < x) j++;
      if (i > 0 && s.xs[i - 1] === x) continue; // keep the first value at x
      ys[j] = s.ys[i];
    }
    out.push(ys);
  }
  return out;
}

function sameXs(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function strictlyAscending(a: ArrayLike<number>): boolean {
  for (let i = 1; i < a.length; i++) if (!(a[i] > a[i - 1])) return false;
  return true;
}

/** parseValue reads a metric value as the API sends it ("NaN", "Infinity", numbers). */
export function parseValue(v: unknown): number {
  if (typeof v === 'number') return v;
  if (v === 'NaN') return NaN;
  if (v === 'Infinity') return Infinity;
  if (v === '-Infinity') return -Infinity;
  if (typeof v === 'string') return Number(v);
  return NaN;
}

/** plottable maps non-finite values (NaN, ±Infinity) to null, and non-positive ones too on a log scale. */
export function plottable(v: number, log: boolean): number | null {
  if (!Number.isFinite(v)) return null;
  if (log && v <= 0) return null;
  return v;
}
