// Metric series for the charts: fetched through one queue for the whole
// page, at most a few requests at a time (a browser opens only six
// connections per server, shared by every tab open on it, and the rest of
// the page needs some), the most urgent first (the charts on screen), and
// dropped when the chart that asked leaves the screen before its turn.
// Overviews (the whole step range at a chart's resolution) are kept in a
// cache bounded by points, so scrolling back draws without a request.

import { ApiError, bulkIntervalURL, getHistoryBulkInterval, onUnauthenticated } from '../api';

declare const __WORKER_URL__: string;

/** A run's points of one metric, ascending by step. */
export interface Series {
  steps: Float64Array;
  ts: Float64Array;
  values: Float64Array;
}

export const EMPTY: Series = { steps: new Float64Array(0), ts: new Float64Array(0), values: new Float64Array(0) };

interface Task {
  run: () => Promise<void>;
  priority: () => number;
  /** whether the task is for something off screen now (a prefetch) */
  background?: () => boolean;
  signal?: AbortSignal;
  reject: (e: unknown) => void;
}

/** How many chart requests run at once. */
export const CONCURRENCY = 4;
const queue: Task[] = [];
let running = 0;
/** tasks running that were for something on screen when they started */
let runningOnScreen = 0;

function pump(): void {
  while (running < CONCURRENCY && queue.length) {
    // The most urgent task now (priorities move as the page scrolls), on
    // screen before off screen: a prefetch waits while what is on screen is
    // still being fetched (on the 2 cores a small server has, it would slow
    // the charts people wait for: a board's first screen asks 6 charts and
    // prefetches 6).
    let best = -1;
    let bestP = Infinity;
    let bestBg = true;
    for (let i = 0; i < queue.length; i++) {
      const t = queue[i];
      if (t.signal?.aborted) {
        queue.splice(i--, 1);
        t.reject(new DOMException('aborted', 'AbortError'));
        continue;
      }
      const bg = t.background?.() ?? false;
      if (bg && runningOnScreen > 0) continue;
      const p = t.priority();
      if ((bestBg && !bg) || (bg === bestBg && p < bestP)) (bestP = p), (best = i), (bestBg = bg);
    }
    if (best < 0) return;
    const bg = bestBg;
    const [t] = queue.splice(best, 1);
    running++;
    if (!bg) runningOnScreen++;
    void t.run().finally(() => {
      running--;
      if (!bg) runningOnScreen--;
      pump();
    });
  }
}

/** enqueue runs fn when a slot is free; a task aborted while it waits is dropped. */
export function enqueue<T>(fn: () => Promise<T>, priority: () => number, signal?: AbortSignal, background?: () => boolean): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal?.aborted) return reject(new DOMException('aborted', 'AbortError'));
    queue.push({ run: () => fn().then(resolve, reject), priority, background, signal, reject });
    pump();
  });
}

// ---- the overview cache ----

const CACHE_POINTS = 1_000_000;
const cache = new Map<string, Series>(); // insertion order = least recently used first
let cachedPoints = 0;

function cacheKey(key: string, runId: string, points: number, minmax: boolean): string {
  return key + '\u0000' + runId + '\u0000' + points + (minmax ? 'm' : 's');
}

function remember(k: string, s: Series): void {
  const old = cache.get(k);
  if (old) {
    cachedPoints -= old.steps.length;
    cache.delete(k);
  }
  cache.set(k, s);
  cachedPoints += s.steps.length;
  for (const [ok, os] of cache) {
    if (cachedPoints <= CACHE_POINTS) break;
    cache.delete(ok);
    cachedPoints -= os.steps.length;
  }
}

/** forget drops the cached overviews of a metric (a live run moved on). */
export function forget(key: string): void {
  for (const [k, s] of cache) {
    if (k.startsWith(key + '\u0000')) {
      cache.delete(k);
      cachedPoints -= s.steps.length;
    }
  }
}

export interface SeriesQuery {
  key: string;
  runIds: string[];
  /** points per run (the server's max_results) */
  points: number;
  minmax: boolean;
  range: { start: number; end: number } | null;
  priority: () => number;
  /** whether the chart is off screen now: its requests wait for those of the charts on screen */
  background?: () => boolean;
  signal?: AbortSignal;
  /** skip the cache (a live refresh) */
  fresh?: boolean;
  /** about how many points a run has of the key (its latest step + 1), when known */
  estimate?: (runId: string) => number | undefined;
}

/**
 * The server samples exactly (every point decoded) while a request's runs
 * hold at most 64 Ki points in range (tracking's exactSampleLimit; a Go
 * test holds the two equal), and from chunk sketches and summaries above:
 * each chunk's sixteenths' lowest and highest points while that gives
 * fewer than twice the points asked, else its first, lowest, highest and
 * last. plan splits runs of medium length into a few requests that each
 * stay under the limit (100 runs of 2,000 steps: 4 requests, exact); runs
 * long enough for summaries to give the points asked, or of unknown
 * length, go 100 to a request, and so do runs that would need more than
 * MAX_SPLIT requests per 100 (100 runs of 10,000 steps: one request, about
 * 100 sketch points each, where 16 requests would give 200: the first
 * screen of a board draws 6 such charts, and zooming fetches the steps
 * shown exactly).
 */
const EXACT_LIMIT = 64 * 1024;
const SUMMARY_POINTS_PER_CHUNK = 4;
const CHUNK_POINTS = 4096;
const MAX_SPLIT = 4;

export function plan(runIds: readonly string[], points: number, estimate?: (runId: string) => number | undefined): string[][] {
  const long: string[] = [];
  const short: { id: string; n: number }[] = [];
  for (const id of runIds) {
    const n = estimate?.(id);
    if (n === undefined || (n / CHUNK_POINTS) * SUMMARY_POINTS_PER_CHUNK >= points) long.push(id);
    else short.push({ id, n });
  }
  const out: string[][] = [];
  const total = short.reduce((a, x) => a + x.n, 0);
  if (total > EXACT_LIMIT && Math.ceil(total / EXACT_LIMIT) <= MAX_SPLIT * Math.ceil(short.length / 100)) {
    let cur: string[] = [];
    let sum = 0;
    for (const x of short) {
      if (cur.length && (sum + x.n > EXACT_LIMIT || cur.length >= 100)) {
        out.push(cur);
        cur = [];
        sum = 0;
      }
      cur.push(x.id);
      sum += x.n;
    }
    if (cur.length) out.push(cur);
  } else long.unshift(...short.map((x) => x.id));
  for (let i = 0; i < long.length; i += 100) out.push(long.slice(i, i + 100));
  return out;
}

/** loadSeries returns each run's series of one metric, from the cache or the server (100 runs a request). */
export async function loadSeries(q: SeriesQuery): Promise<Map<string, Series>> {
  const out = new Map<string, Series>();
  const want: string[] = [];
  for (const id of q.runIds) {
    const c = q.range || q.fresh ? undefined : cache.get(cacheKey(q.key, id, q.points, q.minmax));
    if (c) {
      out.set(id, c);
      // Touch: most recently used last.
      const k = cacheKey(q.key, id, q.points, q.minmax);
      cache.delete(k);
      cache.set(k, c);
    } else want.push(id);
  }
  const chunks = q.minmax ? plan(want, q.points, q.estimate) : plan(want, q.points);
  await Promise.all(
    chunks.map((ids) =>
      enqueue(
        async () => {
          const by = await bulk(ids, q);
          for (const [id, s] of by) {
            out.set(id, s);
            if (!q.range) remember(cacheKey(q.key, id, q.points, q.minmax), s);
          }
        },
        q.priority,
        q.signal,
        q.background,
      ),
    ),
  );
  return out;
}

// ---- the worker (src/worker.ts): fetch and parse off the main thread ----

let worker: Worker | null | undefined;
let nextId = 1;
const waiting = new Map<number, { resolve: (m: any) => void; reject: (e: unknown) => void }>();

function getWorker(): Worker | null {
  if (worker !== undefined) return worker;
  worker = null;
  if (typeof Worker === 'undefined' || !__WORKER_URL__) return null;
  try {
    const w = new Worker(__WORKER_URL__);
    w.onmessage = (e: MessageEvent) => {
      const m = e.data;
      const p = waiting.get(m.id);
      if (!p) return;
      waiting.delete(m.id);
      if (m.error !== undefined) {
        if (m.status === 401) onUnauthenticated();
        p.reject(new ApiError(m.status, m.code, m.error));
      } else p.resolve(m);
    };
    worker = w;
  } catch {
    worker = null;
  }
  return worker;
}

/** startWorker starts the worker ahead of the first chart (a page that will draw charts calls it first thing). */
export function startWorker(): void {
  getWorker();
}

/** bulk fetches one request's runs: in the worker when there is one, else here. */
async function bulk(ids: string[], q: SeriesQuery): Promise<Map<string, Series>> {
  const w = getWorker();
  if (!w) return toSeries(ids, await getHistoryBulkInterval(ids, q.key, q.points, q.range, q.minmax, q.signal));
  const id = nextId++;
  const m = await new Promise<any>((resolve, reject) => {
    if (q.signal?.aborted) return reject(new DOMException('aborted', 'AbortError'));
    waiting.set(id, { resolve, reject });
    q.signal?.addEventListener(
      'abort',
      () => {
        if (!waiting.delete(id)) return;
        w.postMessage({ id, abort: true });
        reject(new DOMException('aborted', 'AbortError'));
      },
      { once: true },
    );
    w.postMessage({ id, url: bulkIntervalURL(ids, q.key, q.points, q.range, q.minmax) });
  });
  const out = new Map<string, Series>();
  for (const rid of ids) out.set(rid, EMPTY);
  for (const r of m.runs as { run_id: string; steps: Float64Array; ts: Float64Array; values: Float64Array }[]) out.set(r.run_id, { steps: r.steps, ts: r.ts, values: r.values });
  return out;
}

/** toSeries splits a bulk answer by run into typed arrays sorted by step. */
export function toSeries(ids: readonly string[], pts: readonly { run_id: string; step: number; ts: number; value: number }[]): Map<string, Series> {
  const count = new Map<string, number>();
  for (const id of ids) count.set(id, 0);
  for (const p of pts) count.set(p.run_id, (count.get(p.run_id) ?? 0) + 1);
  const out = new Map<string, Series>();
  const fill = new Map<string, number>();
  for (const [id, n] of count) {
    out.set(id, { steps: new Float64Array(n), ts: new Float64Array(n), values: new Float64Array(n) });
    fill.set(id, 0);
  }
  let sorted = true;
  const last = new Map<string, number>();
  for (const p of pts) {
    const s = out.get(p.run_id)!;
    const i = fill.get(p.run_id)!;
    s.steps[i] = p.step;
    s.ts[i] = p.ts;
    s.values[i] = p.value;
    fill.set(p.run_id, i + 1);
    const l = last.get(p.run_id);
    if (l !== undefined && p.step < l) sorted = false;
    last.set(p.run_id, p.step);
  }
  if (!sorted) {
    for (const [id, s] of out) {
      const idx = Array.from(s.steps.keys()).sort((a, b) => s.steps[a] - s.steps[b] || s.ts[a] - s.ts[b]);
      out.set(id, { steps: Float64Array.from(idx, (i) => s.steps[i]), ts: Float64Array.from(idx, (i) => s.ts[i]), values: Float64Array.from(idx, (i) => s.values[i]) });
    }
  }
  return out;
}

/** mergeSeries replaces the points of base whose step lies in [start, end] by detail's (both sorted by step). */
export function mergeSeries(base: Series, detail: Series, start: number, end: number): Series {
  const n = base.steps.length;
  let i = 0;
  const steps: number[] = [];
  const ts: number[] = [];
  const values: number[] = [];
  const push = (s: Series, k: number) => {
    steps.push(s.steps[k]);
    ts.push(s.ts[k]);
    values.push(s.values[k]);
  };
  while (i < n && base.steps[i] < start) push(base, i++);
  for (let k = 0; k < detail.steps.length; k++) if (detail.steps[k] >= start && detail.steps[k] <= end) push(detail, k);
  while (i < n && base.steps[i] <= end) i++;
  while (i < n) push(base, i++);
  return { steps: Float64Array.from(steps), ts: Float64Array.from(ts), values: Float64Array.from(values) };
}
