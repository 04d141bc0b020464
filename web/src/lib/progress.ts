// Per-rank step times (GET /api/2.0/sextant/progress) cut into a heatmap:
// one row per rank, one column per time bucket, each cell the median step
// time of the rank's reports in that bucket. Pure functions; the
// component (components/progress.ts) draws it.

/** One rank as the API returns it: points are [step, time_ms, seconds]. */
export interface ProgressRank {
  rank: number;
  node?: string;
  gpu?: number;
  step_time_s: [number, number, number][];
  data_wait_s?: [number, number, number][];
}

export interface HeatRow {
  rank: number;
  node: string;
  gpu: number | null;
  /** Median step time per bucket, in seconds; null where the rank reported nothing. */
  cells: (number | null)[];
  /** The rank's median step time over the whole run. */
  median: number | null;
}

export interface Heatmap {
  fromMs: number;
  toMs: number;
  bucketMs: number;
  rows: HeatRow[];
  /** The median of the ranks' medians: the colour scale's middle. */
  median: number | null;
}

/** median of xs (not changed); null for none. */
export function median(xs: number[]): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/** heatmap cuts the ranks' reports into buckets columns over their common time range. */
export function heatmap(ranks: ProgressRank[], buckets: number): Heatmap {
  let from = Infinity;
  let to = -Infinity;
  for (const r of ranks)
    for (const p of r.step_time_s) {
      from = Math.min(from, p[1]);
      to = Math.max(to, p[1]);
    }
  if (!Number.isFinite(from)) return { fromMs: 0, toMs: 0, bucketMs: 0, rows: [], median: null };
  const n = Math.max(1, Math.floor(buckets));
  const bucketMs = Math.max(1, Math.ceil((to - from + 1) / n));
  const rows = ranks.map((r) => {
    const inBucket: number[][] = Array.from({ length: n }, () => []);
    for (const p of r.step_time_s) inBucket[Math.min(n - 1, Math.floor((p[1] - from) / bucketMs))].push(p[2]);
    return {
      rank: r.rank,
      node: r.node ?? '',
      gpu: r.gpu ?? null,
      cells: inBucket.map((b) => median(b)),
      median: median(r.step_time_s.map((p) => p[2])),
    };
  });
  rows.sort((a, b) => a.rank - b.rank);
  return { fromMs: from, toMs: to, bucketMs, rows, median: median(rows.flatMap((r) => (r.median === null ? [] : [r.median]))) };
}

/**
 * shade is a cell's colour: the ratio of its step time to the run's median,
 * from blue (half or less) through white (the median) to red (twice or more).
 */
export function shade(v: number | null, mid: number | null): string {
  if (v === null || mid === null || !(mid > 0)) return 'transparent';
  const x = Math.max(-1, Math.min(1, Math.log2(v / mid)));
  const k = Math.round(255 * (1 - Math.abs(x)));
  return x >= 0 ? `rgb(255,${k},${k})` : `rgb(${k},${k},255)`;
}
