// Many series on one x axis, at the resolution of the screen. uPlot wants
// every series on one shared, ascending x array; 100 runs sampled by the
// server at their own steps share almost none, and aligning them exactly
// gives 100 × (100 × points) cells, almost all empty. binAlign instead
// cuts the visible x range into one bin per pixel column and keeps, per
// series and bin, the lowest and the highest point (in x order), so that
// every spike survives and the arrays are at most 2 × columns long
// whatever the number of runs. groupBands does the same for groups of
// runs: per bin, the mean of the runs' values and the lowest and highest
// of them (the band).

import type { XY } from './series';

export type Aligned = [number[], ...(number | null)[][]];

/**
 * binAlign aligns series (each with ascending xs) onto bins of [lo, hi]:
 * two slots per bin, at a quarter and three quarters of its width. A
 * series with several points in a bin keeps its lowest and its highest
 * finite value, in the order they come; one point takes the first slot.
 * Points outside [lo, hi] are dropped, except the last one before lo and
 * the first one after hi of each series, kept at their own x so that the
 * lines run to the plot's edges when zoomed. Slots no series uses are
 * left out.
 */
export function binAlign(series: readonly XY[], lo: number, hi: number, cols: number): Aligned {
  const n = Math.max(1, Math.floor(cols));
  const span = hi - lo;
  const slots = 2 * n;
  const grids: Float64Array[] = [];
  const used = new Uint8Array(slots);
  const edgeL = new Map<number, number>(); // series -> index of its edge point before lo
  const edgeR = new Map<number, number>();
  series.forEach((s, si) => {
    const g = new Float64Array(slots).fill(NaN);
    const len = s.xs.length;
    let i = 0;
    while (i < len && s.xs[i] < lo) i++;
    if (i > 0) edgeL.set(si, i - 1);
    while (i < len && s.xs[i] <= hi) {
      const b = span > 0 ? Math.min(n - 1, Math.floor(((s.xs[i] - lo) / span) * n)) : 0;
      // Lowest and highest finite value of this bin, with their order.
      let mn = Infinity;
      let mx = -Infinity;
      let mnAt = -1;
      let mxAt = -1;
      let j = i;
      for (; j < len && s.xs[j] <= hi; j++) {
        const bj = span > 0 ? Math.min(n - 1, Math.floor(((s.xs[j] - lo) / span) * n)) : 0;
        if (bj !== b) break;
        const y = s.ys[j];
        if (y == null || !Number.isFinite(y)) continue;
        if (y < mn) (mn = y), (mnAt = j);
        if (y > mx) (mx = y), (mxAt = j);
      }
      if (mnAt >= 0) {
        if (mnAt === mxAt) g[2 * b] = mn;
        else if (mnAt < mxAt) (g[2 * b] = mn), (g[2 * b + 1] = mx);
        else (g[2 * b] = mx), (g[2 * b + 1] = mn);
        used[2 * b] = 1;
        if (mnAt !== mxAt) used[2 * b + 1] = 1;
      }
      i = j;
    }
    if (i < len) edgeR.set(si, i);
    grids.push(g);
  });
  const left = [...new Set([...edgeL].map(([si, k]) => series[si].xs[k]))].sort((a, b) => a - b);
  const right = [...new Set([...edgeR].map(([si, k]) => series[si].xs[k]))].sort((a, b) => a - b);
  const xs: number[] = [...left];
  const pick: number[] = [];
  for (let k = 0; k < slots; k++) {
    if (!used[k]) continue;
    pick.push(k);
    xs.push(lo + ((Math.floor(k / 2) + (k % 2 ? 0.75 : 0.25)) * (span > 0 ? span : 1)) / n);
  }
  xs.push(...right);
  const out: Aligned = [xs];
  series.forEach((s, si) => {
    const ys: (number | null)[] = new Array(xs.length).fill(null);
    const l = edgeL.get(si);
    if (l !== undefined) ys[left.indexOf(s.xs[l])] = finite(s.ys[l]);
    const g = grids[si];
    for (let k = 0; k < pick.length; k++) {
      const v = g[pick[k]];
      if (!Number.isNaN(v)) ys[left.length + k] = v;
    }
    const r = edgeR.get(si);
    if (r !== undefined) ys[left.length + pick.length + right.indexOf(s.xs[r])] = finite(s.ys[r]);
    out.push(ys);
  });
  return out;
}

function finite(v: number | null | undefined): number | null {
  return v != null && Number.isFinite(v) ? v : null;
}

/** The aggregate of one group per bin: mean of its runs' values, and their lowest and highest. */
export interface Band {
  mean: (number | null)[];
  lo: (number | null)[];
  hi: (number | null)[];
  /** how many runs had a value in the bin */
  runs: number[];
}

/**
 * groupBands cuts [lo, hi] into cols bins and, for each group (a list of
 * runs, each a series with ascending xs), gives per bin the mean over the
 * group's runs of each run's mean in the bin, and the lowest and highest
 * value any of its runs has there. xs are the centres of the bins some
 * group has a value in.
 */
export function groupBands(groups: readonly (readonly XY[])[], lo: number, hi: number, cols: number): { xs: number[]; bands: Band[] } {
  const n = Math.max(1, Math.floor(cols));
  const span = hi - lo;
  const sums: Float64Array[] = [];
  const counts: Uint32Array[] = [];
  const los: Float64Array[] = [];
  const his: Float64Array[] = [];
  const any = new Uint8Array(n);
  const runSum = new Float64Array(n);
  const runCnt = new Uint32Array(n);
  for (const runs of groups) {
    const sum = new Float64Array(n);
    const cnt = new Uint32Array(n);
    const mn = new Float64Array(n).fill(Infinity);
    const mx = new Float64Array(n).fill(-Infinity);
    for (const s of runs) {
      runSum.fill(0);
      runCnt.fill(0);
      for (let i = 0; i < s.xs.length; i++) {
        const x = s.xs[i];
        const y = s.ys[i];
        if (x < lo || x > hi || y == null || !Number.isFinite(y)) continue;
        const b = span > 0 ? Math.min(n - 1, Math.floor(((x - lo) / span) * n)) : 0;
        runSum[b] += y;
        runCnt[b]++;
        if (y < mn[b]) mn[b] = y;
        if (y > mx[b]) mx[b] = y;
      }
      for (let b = 0; b < n; b++) {
        if (runCnt[b] === 0) continue;
        sum[b] += runSum[b] / runCnt[b];
        cnt[b]++;
        any[b] = 1;
      }
    }
    sums.push(sum);
    counts.push(cnt);
    los.push(mn);
    his.push(mx);
  }
  const keep: number[] = [];
  for (let b = 0; b < n; b++) if (any[b]) keep.push(b);
  const xs = keep.map((b) => lo + ((b + 0.5) * (span > 0 ? span : 1)) / n);
  const bands: Band[] = groups.map((_, g) => ({
    mean: keep.map((b) => (counts[g][b] ? sums[g][b] / counts[g][b] : null)),
    lo: keep.map((b) => (counts[g][b] ? los[g][b] : null)),
    hi: keep.map((b) => (counts[g][b] ? his[g][b] : null)),
    runs: keep.map((b) => counts[g][b]),
  }));
  return { xs, bands };
}
