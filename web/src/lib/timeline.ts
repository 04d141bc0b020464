// The arithmetic of the run's time line (components/timeline.ts): steps
// per second from metric timestamps, time to log line through the log's
// density, time-axis ticks, the metrics shown. Pure functions, unit-tested.

import { naturalCompare } from './keys';

/** A metric point: its step and timestamp (ms). */
export interface StepPoint {
  step: number;
  ts: number;
}

/**
 * stepsPerSecond returns, for each gap between points (in time order, of
 * a metric logged at every step or every N steps), the rate Δstep/Δt as
 * [time of the later point, steps per second]. Points with the same time
 * as the one before, or a step that goes back (a resumed run replaying
 * steps), start a new segment and give no rate. With minGap, a rate spans
 * at least that many steps: points closer to the last one taken are
 * passed over (a bucket's lowest and highest point, which a minmax
 * sample returns a step or two apart, would give the noise of one step).
 */
export function stepsPerSecond(points: StepPoint[], minGap = 1): [number, number][] {
  const ps = [...points].filter((p) => Number.isFinite(p.ts) && Number.isFinite(p.step)).sort((a, b) => a.ts - b.ts || a.step - b.step);
  const out: [number, number][] = [];
  let from = ps[0];
  for (let i = 1; i < ps.length; i++) {
    const p = ps[i];
    const dt = p.ts - from.ts;
    const ds = p.step - from.step;
    if (dt <= 0 || ds <= 0) {
      from = p;
      continue;
    }
    if (ds < minGap) continue;
    out.push([p.ts, (ds * 1000) / dt]);
    from = p;
  }
  return out;
}

/**
 * stepGap is the minGap of stepsPerSecond for points spanning a step
 * range: a thousandth of it, at least 1.
 */
export function stepGap(points: StepPoint[]): number {
  let lo = Infinity;
  let hi = -Infinity;
  for (const p of points) {
    if (p.step < lo) lo = p.step;
    if (p.step > hi) hi = p.step;
  }
  return hi > lo ? Math.max(1, Math.floor((hi - lo) / 1000)) : 1;
}

/**
 * nearestIndex returns the index of the point of ts (sorted ascending)
 * nearest to t, or -1 for none.
 */
export function nearestIndex(ts: ArrayLike<number>, t: number): number {
  const n = ts.length;
  if (!n) return -1;
  let lo = 0;
  let hi = n - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ts[mid] < t) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0 && Math.abs(ts[lo - 1] - t) <= Math.abs(ts[lo] - t)) return lo - 1;
  return lo;
}

/**
 * stepRange is the step range to fetch for the time range [t0, t1] of a
 * metric whose points (sorted by time) are known at a coarser sampling:
 * from the step of the last point at or before t0 to that of the first at
 * or after t1, so the lines reach the edges; null when no point is near.
 */
export function stepRange(points: StepPoint[], t0: number, t1: number): { start: number; end: number } | null {
  if (!points.length) return null;
  let a = 0;
  let b = points.length - 1;
  for (let i = 0; i < points.length; i++) {
    if (points[i].ts <= t0) a = i;
    if (points[i].ts >= t1) {
      b = i;
      break;
    }
  }
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = a; i <= b; i++) {
    lo = Math.min(lo, points[i].step);
    hi = Math.max(hi, points[i].step);
  }
  return lo <= hi ? { start: lo, end: hi } : null;
}

/**
 * defaultMetricKeys picks the metrics the time line shows when nobody has
 * chosen: a loss first (a key named loss, or ending in /loss), then the
 * other keys in natural order, system metrics left out; at most n.
 */
export function defaultMetricKeys(keys: readonly string[], n = 4): string[] {
  // The job's own: not the GPU sampler's system/ nor the progress reports' sextant/progress/ metrics.
  const own = [...new Set(keys)].filter((k) => !k.startsWith('system/') && !k.startsWith('sextant/progress/')).sort(naturalCompare);
  const loss = own.filter((k) => /(^|\/)loss$/.test(k));
  return [...loss, ...own.filter((k) => !loss.includes(k))].slice(0, n);
}

/** The log's density over time, as GET logs/density answers. */
export interface LogDensity {
  from_ms: number;
  to_ms: number;
  bucket_ms: number;
  lines: number[];
  first_lines: number[];
  total_lines: number;
}

/**
 * lineAt returns the log line to open for time t: the first line of the
 * bucket holding t, or of the next bucket with lines after it, or the
 * last line; 1 for an empty log.
 */
export function lineAt(d: LogDensity | null, t: number): number {
  if (!d || !d.total_lines || !d.bucket_ms) return 1;
  let b = Math.floor((t - d.from_ms) / d.bucket_ms);
  if (b < 0) return 1;
  for (; b < d.first_lines.length; b++) if (d.first_lines[b] > 0) return d.first_lines[b];
  return d.total_lines;
}

const STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800].map((s) => s * 1000);

/** ticks returns tick times for [t0, t1] over width px, at least minPx apart, on round local times. */
export function ticks(t0: number, t1: number, width: number, minPx = 90): { step: number; times: number[] } {
  const span = Math.max(t1 - t0, 1);
  const want = (span * minPx) / Math.max(width, 1);
  const step = STEPS.find((s) => s >= want) ?? STEPS[STEPS.length - 1];
  // Round to the step in local time (a day starts at local midnight).
  const off = new Date(t0).getTimezoneOffset() * 60_000;
  let t = Math.ceil((t0 - off) / step) * step + off;
  const times: number[] = [];
  for (; t <= t1 && times.length < 1000; t += step) times.push(t);
  return { step, times };
}

/** tickLabel formats a tick time for a given step: HH:MM(:SS), with the date at midnight. */
export function tickLabel(t: number, step: number): string {
  const d = new Date(t);
  const p = (n: number) => String(n).padStart(2, '0');
  const hm = `${p(d.getHours())}:${p(d.getMinutes())}`;
  if (step < 60_000) return `${hm}:${p(d.getSeconds())}`;
  if (d.getHours() === 0 && d.getMinutes() === 0) return `${d.getMonth() + 1}/${d.getDate()}`;
  return hm;
}

/** bucketMax reduces [t, v] points to at most n buckets over [t0, t1], keeping each bucket's maximum. */
export function bucketMax(points: [number, number][], t0: number, t1: number, n: number): [number, number][] {
  if (points.length <= n) return points;
  const w = (t1 - t0) / n;
  const out: [number, number][] = [];
  let cur = -1;
  for (const [t, v] of points) {
    const b = Math.floor((t - t0) / w);
    if (b !== cur) {
      out.push([t, v]);
      cur = b;
    } else if (v > out[out.length - 1][1]) out[out.length - 1][1] = v;
  }
  return out;
}

/**
 * breakAtGaps returns [t, v] points (in time order) with a [t, null] point
 * put in each gap longer than factor times the median spacing of the
 * points (a killed attempt and its resume, a GPU that stopped reporting),
 * so that a line drawn through them stops at the gap instead of crossing
 * it as if the job had worked on. Points with a gap of at most minGap ms
 * are never broken apart.
 */
export function breakAtGaps<V extends number | null>(points: [number, V][], factor = 5, minGap = 0): [number, V | null][] {
  if (points.length < 3) return points;
  // The median of at most 255 spacings spread over the points: this runs
  // on every redraw (the pointer moving), for every lane.
  const n = points.length - 1;
  const stride = Math.max(1, Math.floor(n / 255));
  const dts: number[] = [];
  for (let i = 1; i <= n; i += stride) {
    const dt = points[i][0] - points[i - 1][0];
    if (dt > 0) dts.push(dt);
  }
  if (!dts.length) return points;
  dts.sort((a, b) => a - b);
  const limit = Math.max(dts[dts.length >> 1] * factor, minGap);
  let any = false;
  for (let i = 1; i <= n && !any; i++) any = points[i][0] - points[i - 1][0] > limit;
  if (!any) return points;
  const out: [number, V | null][] = [points[0]];
  for (let i = 1; i < points.length; i++) {
    const t0 = points[i - 1][0];
    const t1 = points[i][0];
    if (t1 - t0 > limit) out.push([(t0 + t1) / 2, null]);
    out.push(points[i]);
  }
  return out;
}
