// A metric chart: one metric key, up to 100 runs overlaid, drawn by uPlot
// on a canvas. Points come from the server already downsampled to about
// the chart's pixel width (get-history-bulk-interval with sampling=minmax:
// each step bucket's lowest and highest point, so a spike survives any
// zoom). Zooming (drag across the chart) fetches that step range again at
// full resolution and merges it into the overview; a double click zooms
// out. Smoothing is a debiased EMA drawn over a min/max band of the raw
// values.

import uPlot from 'uplot';
import { getHistoryBulkInterval, RunPoint } from '../api';
import { config } from '../config';
import { h, Scope } from '../dom';
import { fmtDuration, fmtNumber, fmtTime } from '../lib/format';
import { emaDebiased } from '../lib/smooth';
import { align, envelope, mergeRange, plottable, Point, XY } from '../lib/series';
import { perf } from '../perf';

export type XMode = 'step' | 'relative' | 'wall';

export interface ChartRun {
  id: string;
  name: string;
  color: string;
  /** the run's start time (ms), the origin of the relative time axis */
  startTime?: number;
  /** a label shown after the name (the group it belongs to) */
  group?: string;
}

export interface ChartSettings {
  xMode: XMode;
  smoothing: number;
  log: boolean;
}

export interface ChartOpts extends ChartSettings {
  metricKey: string;
  runs: ChartRun[];
  height?: number;
  /** whether the chart should refresh itself (some run is live) */
  live?: () => boolean;
}

const MAX_RUNS = 100;

export class MetricChart {
  readonly el: HTMLElement;
  private plotHost: HTMLElement;
  private legend: HTMLElement;
  private status: HTMLElement;
  private plot: uPlot | null = null;
  private overview = new Map<string, Point[]>();
  private view = new Map<string, Point[]>();
  private zoom: { start: number; end: number; xmin: number; xmax: number } | null = null;
  private abort: AbortController | null = null;
  private legendValues: HTMLElement[] = [];
  private width = 0;
  private seriesOfRun: number[] = [];
  private stepOfX: { xs: number[]; steps: number[] } = { xs: [], steps: [] };
  private disposed = false;

  constructor(
    private opts: ChartOpts,
    scope: Scope,
  ) {
    this.plotHost = h('div', { class: 'chart-plot' });
    this.legend = h('div', { class: 'chart-legend' });
    this.status = h('div', { class: 'chart-status' });
    this.el = h(
      'div',
      { class: 'chart', 'data-metric': opts.metricKey },
      h('div', { class: 'chart-title' }, h('span', { class: 'chart-key' }, opts.metricKey), this.status),
      this.plotHost,
      this.legend,
    );
    this.plotHost.addEventListener('dblclick', () => this.resetZoom());
    const ro = new ResizeObserver(() => {
      const w = Math.floor(this.plotHost.clientWidth);
      if (w > 0 && Math.abs(w - this.width) > 1) {
        const first = this.width === 0;
        this.width = w;
        if (first) void this.load();
        else this.plot?.setSize({ width: w, height: this.height });
      }
    });
    ro.observe(this.plotHost);
    scope.add(() => this.destroy());
    if (opts.live) {
      scope.interval(() => {
        if (this.opts.live?.() && !this.zoom && document.visibilityState === 'visible') void this.load(true);
      }, config.runPollMs);
    }
  }

  private get height(): number {
    return this.opts.height ?? 220;
  }

  private get runs(): ChartRun[] {
    return this.opts.runs.slice(0, MAX_RUNS);
  }

  destroy(): void {
    this.disposed = true;
    this.abort?.abort();
    this.plot?.destroy();
    this.plot = null;
  }

  /** update changes display settings; only a change of runs or key refetches. */
  update(s: Partial<ChartOpts>): void {
    const refetch = (s.runs && s.runs.map((r) => r.id).join() !== this.opts.runs.map((r) => r.id).join()) || (s.metricKey && s.metricKey !== this.opts.metricKey);
    const xChanged = s.xMode && s.xMode !== this.opts.xMode;
    this.opts = { ...this.opts, ...s };
    if (refetch) {
      this.zoom = null;
      void this.load();
    } else {
      if (xChanged) this.zoom = null;
      if (s.runs) {
        // Colours or labels changed: rebuild the plot's series.
        this.plot?.destroy();
        this.plot = null;
      }
      this.render(true);
    }
  }

  private points(): number {
    return Math.max(100, Math.min(2500, this.width || 600));
  }

  private async fetch(range: { start: number; end: number } | null): Promise<Map<string, Point[]>> {
    this.abort?.abort();
    const ac = new AbortController();
    this.abort = ac;
    const ids = this.runs.map((r) => r.id);
    const pts: RunPoint[] = ids.length ? await getHistoryBulkInterval(ids, this.opts.metricKey, this.points(), range, true, ac.signal) : [];
    const out = new Map<string, Point[]>();
    for (const id of ids) out.set(id, []);
    for (const p of pts) out.get(p.run_id)?.push({ step: p.step, ts: p.ts, value: p.value });
    for (const arr of out.values()) arr.sort((a, b) => a.step - b.step || a.ts - b.ts);
    return out;
  }

  /** load fetches the overview (the whole step range) and draws it. */
  async load(quiet = false): Promise<void> {
    if (this.width === 0) return;
    const t0 = performance.now();
    if (!quiet) this.status.textContent = 'loading…';
    try {
      const data = await this.fetch(null);
      if (this.disposed) return;
      this.overview = data;
      this.view = data;
      this.render(!quiet);
      this.status.textContent = '';
      perf('chart-draw', performance.now() - t0, this.opts.metricKey);
      this.el.dataset.drawMs = String(Math.round(performance.now() - t0));
    } catch (e: any) {
      if (e?.name === 'AbortError') return;
      this.status.textContent = e?.message ?? String(e);
      this.status.classList.add('error-text');
    }
  }

  private async zoomTo(xmin: number, xmax: number): Promise<void> {
    const range = this.stepRange(xmin, xmax);
    if (!range) return;
    const t0 = performance.now();
    this.zoom = { ...range, xmin, xmax };
    this.status.textContent = `steps ${fmtNumber(range.start)}–${fmtNumber(range.end)}`;
    try {
      const detail = await this.fetch(range);
      if (this.disposed || !this.zoom) return;
      const merged = new Map<string, Point[]>();
      for (const [id, base] of this.overview) merged.set(id, mergeRange(base, detail.get(id) ?? [], range.start, range.end));
      this.view = merged;
      this.render(false);
      const ms = performance.now() - t0;
      perf('chart-zoom', ms, this.opts.metricKey);
      this.el.dataset.zoomMs = String(Math.round(ms));
      this.el.dataset.zoomCount = String(Number(this.el.dataset.zoomCount ?? 0) + 1);
    } catch (e: any) {
      if (e?.name !== 'AbortError') this.status.textContent = e?.message ?? String(e);
    }
  }

  resetZoom(): void {
    if (!this.zoom) return;
    this.zoom = null;
    this.view = this.overview;
    this.status.textContent = '';
    this.render(true);
  }

  /** stepRange maps an x range back to the steps of the points drawn in it. */
  private stepRange(xmin: number, xmax: number): { start: number; end: number } | null {
    if (this.opts.xMode === 'step') return { start: Math.max(0, Math.floor(xmin)), end: Math.ceil(xmax) };
    let lo = Infinity;
    let hi = -Infinity;
    const { xs, steps } = this.stepOfX;
    for (let i = 0; i < xs.length; i++) {
      if (xs[i] >= xmin && xs[i] <= xmax) {
        lo = Math.min(lo, steps[i]);
        hi = Math.max(hi, steps[i]);
      }
    }
    return lo <= hi ? { start: lo, end: hi } : null;
  }

  private xOf(p: Point, run: ChartRun, origin: number): number {
    switch (this.opts.xMode) {
      case 'wall':
        return p.ts / 1000;
      case 'relative':
        return (p.ts - origin) / 1000;
      default:
        return p.step;
    }
  }

  /** render builds uPlot's data from the points held and draws it. */
  private render(resetScales: boolean): void {
    const runs = this.runs;
    const { smoothing, log } = this.opts;
    const series: XY[] = [];
    const bands: { lo: (number | null)[]; hi: (number | null)[] }[] = [];
    const stepXs: number[] = [];
    const stepSteps: number[] = [];
    let total = 0;
    for (const run of runs) {
      const pts = this.view.get(run.id) ?? [];
      total += pts.length;
      const origin = run.startTime ?? (pts.length ? Math.min(...pts.slice(0, 64).map((p) => p.ts)) : 0);
      let xs = new Float64Array(pts.length);
      const ys: (number | null)[] = new Array(pts.length);
      for (let i = 0; i < pts.length; i++) {
        xs[i] = this.xOf(pts[i], run, origin);
        ys[i] = plottable(pts[i].value, log);
      }
      if (this.opts.xMode !== 'step') {
        // Time axes need not be monotonic in step order: sort by x.
        const idx = Array.from(xs.keys()).sort((a, b) => xs[a] - xs[b]);
        xs = Float64Array.from(idx, (i) => xs[i]);
        const sorted = idx.map((i) => ys[i]);
        ys.splice(0, ys.length, ...sorted);
        for (let i = 0; i < idx.length; i++) {
          stepXs.push(xs[i]);
          stepSteps.push(pts[idx[i]].step);
        }
      }
      const sm = smoothing > 0 ? emaDebiased(ys, smoothing) : ys;
      series.push({ xs, ys: sm });
      if (smoothing > 0) {
        const env = envelope(xs, ys, Math.max(10, this.points() / 2));
        series.push({ xs, ys: env.hi }, { xs, ys: env.lo });
        bands.push(env);
      }
    }
    this.stepOfX = { xs: stepXs, steps: stepSteps };
    const data = align(series) as uPlot.AlignedData;
    this.el.dataset.points = String(total);
    this.el.dataset.runs = String(runs.length);
    this.drawLegend(runs);

    const withBands = smoothing > 0;
    const per = withBands ? 3 : 1;
    this.seriesOfRun = runs.map((_, i) => 1 + i * per);
    const keep = !resetScales && this.plot && this.zoom;
    if (this.plot && !this.needsRebuild(per, log)) {
      this.plot.setData(data, !keep);
      if (keep && this.zoom) this.plot.setScale('x', { min: this.zoom.xmin, max: this.zoom.xmax });
      return;
    }
    this.plot?.destroy();
    const s: uPlot.Series[] = [{}];
    const uBands: uPlot.Band[] = [];
    runs.forEach((run, i) => {
      s.push({ label: run.name, stroke: run.color, width: 1.5, points: { show: false }, spanGaps: true });
      if (withBands) {
        const hi = s.length;
        s.push({ stroke: 'transparent', width: 0, points: { show: false }, spanGaps: true });
        s.push({ stroke: 'transparent', width: 0, points: { show: false }, spanGaps: true });
        uBands.push({ series: [hi, hi + 1], fill: run.color + '30' });
        void i;
      }
    });
    const xMode = this.opts.xMode;
    const opts: uPlot.Options = {
      width: this.width,
      height: this.height,
      legend: { show: false },
      pxAlign: 0,
      cursor: { drag: { x: true, y: false, setScale: false }, points: { show: false }, bind: { dblclick: () => () => null } },
      scales: {
        x: { time: xMode === 'wall' },
        y: { distr: log ? 3 : 1 },
      },
      axes: [
        {
          stroke: 'var(--muted)',
          grid: { stroke: 'var(--grid)', width: 1 },
          values: xMode === 'relative' ? (_u, splits) => splits.map((v) => fmtDuration(v * 1000)) : xMode === 'step' ? (_u, splits) => splits.map((v) => fmtNumber(v)) : undefined,
        },
        { stroke: 'var(--muted)', grid: { stroke: 'var(--grid)', width: 1 }, size: 64, values: (_u, splits) => splits.map((v) => fmtNumber(v)) },
      ],
      series: s,
      bands: uBands,
      hooks: {
        // A drag selects a range: zoom to it here (uPlot's own zoom is off,
        // so that resizes and data updates never count as a zoom).
        setSelect: [
          (u) => {
            const { left, width } = u.select;
            if (width < 3) return;
            const min = u.posToVal(left, 'x');
            const max = u.posToVal(left + width, 'x');
            u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
            u.setScale('x', { min, max });
            void this.zoomTo(min, max);
          },
        ],
        setCursor: [(u) => this.showCursor(u)],
      },
    };
    // uPlot reads CSS variables poorly in canvas strokes: resolve them.
    const css = getComputedStyle(document.documentElement);
    for (const ax of opts.axes!) {
      ax.stroke = css.getPropertyValue('--muted').trim() || '#777';
      (ax.grid as any).stroke = css.getPropertyValue('--grid').trim() || '#ddd';
    }
    this.plot = new uPlot(opts, data, this.plotHost);
    this.el.dataset.xMode = xMode;
  }

  private needsRebuild(per: number, log: boolean): boolean {
    const p = this.plot!;
    return p.series.length !== 1 + this.runs.length * per || (p.scales.y.distr === 3) !== log || (p.scales.x.time ?? false) !== (this.opts.xMode === 'wall') || this.el.dataset.xMode !== this.opts.xMode;
  }

  private drawLegend(runs: ChartRun[]): void {
    this.legendValues = [];
    const items = runs.map((run) => {
      const v = h('span', { class: 'legend-value' });
      this.legendValues.push(v);
      const last = (this.view.get(run.id) ?? []).at(-1);
      v.textContent = last ? fmtNumber(last.value) : '';
      return h(
        'span',
        { class: 'legend-item', title: run.name },
        h('i', { class: 'swatch', 'data-color': run.color }),
        h('span', { class: 'legend-name' }, run.name),
        run.group ? h('span', { class: 'legend-group' }, run.group) : null,
        v,
      );
    });
    this.legend.replaceChildren(...items);
    // Swatch colours through CSSOM (inline style attributes are refused by the CSP).
    this.legend.querySelectorAll<HTMLElement>('.swatch').forEach((el) => (el.style.background = el.dataset.color ?? ''));
    if (runs.length === 0) this.legend.textContent = 'no runs';
  }

  private showCursor(u: uPlot): void {
    const idx = u.cursor.idx;
    this.seriesOfRun.forEach((si, i) => {
      const el = this.legendValues[i];
      if (!el) return;
      const v = idx == null ? null : (u.data[si]?.[idx] as number | null | undefined);
      el.textContent = v == null ? '' : fmtNumber(v);
    });
    if (idx != null) {
      const x = u.data[0][idx];
      const label = this.opts.xMode === 'wall' ? fmtTime(x * 1000) : this.opts.xMode === 'relative' ? fmtDuration(x * 1000) : 'step ' + fmtNumber(x);
      this.status.textContent = (this.zoom ? 'zoomed · ' : '') + label;
    }
  }
}
