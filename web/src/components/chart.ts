// A metric chart drawn by uPlot on a canvas: lines (a run's metric key
// each: up to 100 runs of one key, or the GPUs of one run), or groups of
// runs (one line per group, its mean, over a min–max band). Points come
// from the server already downsampled (get-history-bulk-interval: min/max
// per step bucket for lines, so a spike survives; MLflow's even steps for
// groups, so runs line up), and many lines are put on a shared x axis of
// one bin per pixel column (lib/bins), so 100 runs draw as fast as one.
// Zooming (drag across the chart) fetches that step range again at full
// resolution and merges it into the overview; a double click zooms out.
// Smoothing is a debiased EMA drawn over a min/max band of the raw values.

import uPlot from 'uplot';
import { config } from '../config';
import { h, Scope } from '../dom';
import { binAlign, groupBands } from '../lib/bins';
import { EMPTY, loadSeries, mergeSeries, Series } from '../lib/fetchq';
import { fmtDuration, fmtNumber, fmtTime } from '../lib/format';
import { inFrame } from '../lib/frames';
import { emaDebiased } from '../lib/smooth';
import { align, envelope, plottable, XY } from '../lib/series';
import { perf } from '../perf';

export type XMode = 'step' | 'relative' | 'wall';

/** A run as the charts name and colour it. */
export interface ChartRun {
  id: string;
  name: string;
  color: string;
  /** the run's start time (ms), the origin of the relative time axis */
  startTime?: number;
  /** a label shown after the name (the group it belongs to) */
  group?: string;
}

/** One drawn line: a run's metric key. */
export interface ChartLine {
  runId: string;
  key: string;
  name: string;
  color: string;
  startTime?: number;
  group?: string;
}

/** A group of runs drawn as one line (the mean) over a band (the lowest and highest). */
export interface ChartGroup {
  name: string;
  color: string;
  runs: { runId: string; startTime?: number }[];
}

export interface ChartSettings {
  xMode: XMode;
  smoothing: number;
  log: boolean;
}

export interface ChartOpts extends ChartSettings {
  /** the chart's title, and its data-metric attribute unless id is set */
  title: string;
  id?: string;
  lines: ChartLine[];
  /** group mode: the groups, and the key they draw */
  groups?: ChartGroup[];
  groupKey?: string;
  height?: number;
  /** whether the chart should refresh itself (some run is live) */
  live?: () => boolean;
  /** the urgency of this chart's requests (lower first), read when a request slot frees */
  priority?: () => number;
  /** whether the chart is off screen now (its requests wait for the charts on screen) */
  background?: () => boolean;
  /** wait this long before the first request (a chart scrolled past at once asks nothing) */
  deferMs?: number;
  /** about how many points a run has of a key (its latest step + 1), when known: see fetchq.plan */
  estimate?: (runId: string, key: string) => number | undefined;
}

/** latestSteps makes a ChartOpts.estimate from runs' latest metrics (each key's latest step + 1). */
export function latestSteps(runs: readonly { info: { run_id: string }; data: { metrics: { key: string; step: number }[] } }[]): (runId: string, key: string) => number | undefined {
  const byRun = new Map(runs.map((r) => [r.info.run_id, r]));
  const cache = new Map<string, Map<string, number>>();
  return (runId, key) => {
    let m = cache.get(runId);
    if (!m) {
      const r = byRun.get(runId);
      if (!r) return undefined;
      m = new Map(r.data.metrics.map((x) => [x.key, x.step + 1]));
      cache.set(runId, m);
    }
    return m.get(key);
  };
}

/** linesOf draws key for each run. */
export function linesOf(key: string, runs: readonly ChartRun[]): ChartLine[] {
  return runs.map((r) => ({ runId: r.id, key, name: r.name, color: r.color, startTime: r.startTime, group: r.group }));
}

const MAX_LINES = 100;
/** Points a chart asks for in all (lines × points per line), so 100 runs cost what 10 do. */
const LINE_BUDGET = 20_000;
const GROUP_BUDGET = 150_000;
const LEGEND_MAX = 12;

const sid = (key: string, runId: string) => key + '\u0000' + runId;

let theme: { muted: string; grid: string } | null = null;
/** themeColours reads the axis colours once (uPlot's canvas strokes cannot take CSS variables), again when the scheme changes. */
function themeColours(): { muted: string; grid: string } {
  if (!theme) {
    const css = getComputedStyle(document.documentElement);
    theme = { muted: css.getPropertyValue('--muted').trim() || '#777', grid: css.getPropertyValue('--grid').trim() || '#ddd' };
    window.matchMedia?.('(prefers-color-scheme: dark)').addEventListener('change', () => (theme = null), { once: true });
  }
  return theme;
}

/**
 * lonePoint draws a series' points when it has a single one in view: a
 * metric logged once (a final test score) has no line to draw, and its
 * chart looked empty.
 */
function lonePoint(u: uPlot, si: number, i0: number, i1: number): boolean {
  const ys = u.data[si];
  let n = 0;
  for (let i = i0; i <= i1; i++) if (ys[i] != null && ++n > 1) return false;
  return n === 1;
}

export class MetricChart {
  readonly el: HTMLElement;
  private plotHost: HTMLElement;
  private legend: HTMLElement;
  private status: HTMLElement;
  private plot: uPlot | null = null;
  private overview = new Map<string, Series>();
  private view = new Map<string, Series>();
  private zoom: { start: number; end: number; xmin: number; xmax: number } | null = null;
  private abort: AbortController | null = null;
  private legendValues: HTMLElement[] = [];
  private width = 0;
  /** uPlot series index of each legend entry (line or group) */
  private seriesOf: number[] = [];
  private labels: string[] = [];
  private focused: number | null = null;
  private disposed = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private loaded = false;
  private cancelDraw: (() => void) | null = null;

  constructor(
    private opts: ChartOpts,
    scope: Scope,
  ) {
    this.plotHost = h('div', { class: 'chart-plot' });
    this.legend = h('div', { class: 'chart-legend' });
    this.status = h('div', { class: 'chart-status' });
    const title = h('span', { class: 'chart-key', title: opts.title }, opts.title);
    this.el = h('div', { class: 'chart', 'data-metric': opts.id ?? opts.title }, h('div', { class: 'chart-title' }, title, this.status), this.plotHost, this.legend);
    this.plotHost.style.minHeight = this.height + 'px';
    this.plotHost.addEventListener('dblclick', () => this.resetZoom());
    const ro = new ResizeObserver(() => {
      const w = Math.floor(this.plotHost.clientWidth);
      if (w > 0 && Math.abs(w - this.width) > 1) {
        const first = this.width === 0;
        this.width = w;
        if (first) {
          if (opts.deferMs) this.timer = setTimeout(() => void this.load(), opts.deferMs);
          else void this.load();
        } else this.plot?.setSize({ width: w, height: this.height });
      }
    });
    ro.observe(this.plotHost);
    scope.add(() => {
      ro.disconnect();
      this.destroy();
    });
    if (opts.live) {
      scope.interval(() => {
        if (this.opts.live?.() && !this.zoom && this.loaded && document.visibilityState === 'visible') void this.load(true);
      }, config.runPollMs);
    }
  }

  private get height(): number {
    return this.opts.height ?? 220;
  }

  private get lines(): ChartLine[] {
    return this.opts.lines.slice(0, MAX_LINES);
  }

  private get grouped(): boolean {
    return !!(this.opts.groups && this.opts.groupKey);
  }

  destroy(): void {
    this.disposed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.cancelDraw?.();
    this.abort?.abort();
    this.plot?.destroy();
    this.plot = null;
  }

  /** update changes display settings; a change of lines, groups or key refetches. */
  update(s: Partial<ChartOpts>): void {
    const sig = (o: ChartOpts) =>
      o.groups && o.groupKey ? 'g' + o.groupKey + '|' + o.groups.map((g) => g.name + ':' + g.runs.map((r) => r.runId).join()).join(';') : o.lines.map((l) => sid(l.key, l.runId)).join();
    const next = { ...this.opts, ...s };
    const refetch = sig(next) !== sig(this.opts);
    const xChanged = s.xMode && s.xMode !== this.opts.xMode;
    this.opts = next;
    if (refetch) {
      this.zoom = null;
      this.plot?.destroy();
      this.plot = null;
      void this.load();
    } else {
      if (xChanged) this.zoom = null;
      if (s.lines || s.groups) {
        // Colours or labels changed: rebuild the plot's series.
        this.plot?.destroy();
        this.plot = null;
      }
      if (this.loaded) this.render(true);
    }
  }

  /** points asks the server for per run: the plot's width, less when many runs share it. */
  private points(): number {
    const w = Math.max(64, Math.min(2500, this.width || 600));
    if (this.grouped) {
      const n = this.opts.groups!.reduce((a, g) => a + g.runs.length, 0) || 1;
      return Math.max(32, Math.min(w, Math.floor(GROUP_BUDGET / n)));
    }
    return Math.max(64, Math.min(w, Math.floor(LINE_BUDGET / Math.max(1, this.lines.length))));
  }

  private async fetch(range: { start: number; end: number } | null, fresh = false): Promise<Map<string, Series>> {
    this.abort?.abort();
    const ac = new AbortController();
    this.abort = ac;
    const byKey = new Map<string, string[]>();
    if (this.grouped) byKey.set(this.opts.groupKey!, [...new Set(this.opts.groups!.flatMap((g) => g.runs.map((r) => r.runId)))]);
    else for (const l of this.lines) byKey.set(l.key, [...(byKey.get(l.key) ?? []), l.runId]);
    const out = new Map<string, Series>();
    const priority = this.opts.priority ?? (() => 0);
    const points = this.points();
    await Promise.all(
      [...byKey].map(async ([key, runIds]) => {
        const est = this.opts.estimate;
        // A zoomed range holds fewer points: the whole series' size overestimates it, which only splits less.
        const estimate = est && !range ? (id: string) => est(id, key) : undefined;
        const got = await loadSeries({ key, runIds: [...new Set(runIds)], points, minmax: !this.grouped, range, priority, background: this.opts.background, signal: ac.signal, fresh, estimate });
        for (const [id, s] of got) out.set(sid(key, id), s);
      }),
    );
    return out;
  }

  /** load fetches the overview (the whole step range) and draws it. */
  async load(quiet = false): Promise<void> {
    if (this.width === 0 || this.disposed) return;
    const t0 = performance.now();
    if (!quiet) this.status.textContent = 'loading…';
    try {
      const data = await this.fetch(null, quiet);
      if (this.disposed) return;
      const t1 = performance.now();
      // Drawn in a coming frame, within the frame budget (lib/frames).
      this.cancelDraw?.();
      this.cancelDraw = inFrame(() => {
        this.cancelDraw = null;
        if (this.disposed) return;
        this.overview = data;
        this.view = data;
        this.loaded = true;
        this.render(!quiet);
        this.status.textContent = '';
        const ms = performance.now() - t0;
        perf('chart-draw', ms, this.opts.id ?? this.opts.title);
        this.el.dataset.drawMs = String(Math.round(ms));
        this.el.dataset.fetchMs = String(Math.round(t1 - t0));
      }, this.opts.priority);
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
      const merged = new Map<string, Series>();
      for (const [id, base] of this.overview) merged.set(id, mergeSeries(base, detail.get(id) ?? EMPTY, range.start, range.end));
      this.view = merged;
      this.render(false);
      const ms = performance.now() - t0;
      perf('chart-zoom', ms, this.opts.id ?? this.opts.title);
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

  /** origin is the zero of the relative time axis for a run. */
  private origin(s: Series, startTime?: number): number {
    if (startTime) return startTime;
    let m = Infinity;
    for (let i = 0; i < Math.min(64, s.ts.length); i++) m = Math.min(m, s.ts[i]);
    return Number.isFinite(m) ? m : 0;
  }

  /** xy maps a series onto the x axis in use (sorted by x) with plottable ys. */
  private xy(s: Series, startTime?: number): XY {
    const n = s.steps.length;
    const log = this.opts.log;
    let xs = new Float64Array(n);
    let ys: (number | null)[] = new Array(n);
    const mode = this.opts.xMode;
    const o = mode === 'relative' ? this.origin(s, startTime) : 0;
    for (let i = 0; i < n; i++) {
      xs[i] = mode === 'step' ? s.steps[i] : mode === 'wall' ? s.ts[i] / 1000 : (s.ts[i] - o) / 1000;
      ys[i] = plottable(s.values[i], log);
    }
    if (mode !== 'step') {
      // Time need not grow with the step: sort by x.
      const idx = Array.from(xs.keys()).sort((a, b) => xs[a] - xs[b]);
      xs = Float64Array.from(idx, (i) => xs[i]);
      ys = idx.map((i) => ys[i]);
    }
    return { xs, ys };
  }

  /** stepRange maps an x range back to the steps of the points drawn in it. */
  private stepRange(xmin: number, xmax: number): { start: number; end: number } | null {
    // Steps may be negative (MLflow accepts them): no clamp at 0, only to
    // the server's range.
    if (this.opts.xMode === 'step') {
      return { start: Math.max(-Number.MAX_SAFE_INTEGER, Math.floor(xmin)), end: Math.min(Number.MAX_SAFE_INTEGER, Math.ceil(xmax)) };
    }
    let lo = Infinity;
    let hi = -Infinity;
    const starts = new Map<string, number | undefined>();
    for (const l of this.lines) starts.set(sid(l.key, l.runId), l.startTime);
    for (const [id, s] of this.view) {
      const o = this.opts.xMode === 'relative' ? this.origin(s, starts.get(id)) : 0;
      for (let i = 0; i < s.ts.length; i++) {
        const x = this.opts.xMode === 'wall' ? s.ts[i] / 1000 : (s.ts[i] - o) / 1000;
        if (x >= xmin && x <= xmax) (lo = Math.min(lo, s.steps[i])), (hi = Math.max(hi, s.steps[i]));
      }
    }
    return lo <= hi ? { start: lo, end: hi } : null;
  }

  /** domain is the x range the bins cover: the zoom, or every point's. */
  private domain(series: readonly XY[]): [number, number] {
    if (this.zoom) return [this.zoom.xmin, this.zoom.xmax];
    let lo = Infinity;
    let hi = -Infinity;
    for (const s of series) {
      if (s.xs.length === 0) continue;
      lo = Math.min(lo, s.xs[0]);
      hi = Math.max(hi, s.xs[s.xs.length - 1]);
    }
    return Number.isFinite(lo) ? [lo, hi] : [0, 1];
  }

  /** render builds uPlot's data from the points held and draws it. */
  private render(resetScales: boolean): void {
    const { smoothing } = this.opts;
    const cols = Math.max(32, this.width || 600);
    let data: uPlot.AlignedData;
    let total = 0;
    const entries: { name: string; color: string; group?: string }[] = [];
    const band = this.grouped || smoothing > 0;
    if (this.grouped) {
      const groups = this.opts.groups!;
      const key = this.opts.groupKey!;
      const perGroup = groups.map((g) =>
        g.runs.map((r) => {
          const s = this.view.get(sid(key, r.runId)) ?? EMPTY;
          total += s.steps.length;
          return this.xy(s, r.startTime);
        }),
      );
      const [lo, hi] = this.domain(perGroup.flat());
      const { xs, bands } = groupBands(perGroup, lo, hi, Math.min(cols, this.points()));
      const cols3: (number | null)[][] = [];
      bands.forEach((b, i) => {
        cols3.push(smoothing > 0 ? emaDebiased(b.mean, smoothing) : b.mean, b.hi, b.lo);
        entries.push({ name: groups[i].name, color: groups[i].color, group: `${groups[i].runs.length} run${groups[i].runs.length === 1 ? '' : 's'}` });
      });
      data = [xs, ...cols3] as uPlot.AlignedData;
    } else {
      const series: XY[] = [];
      for (const l of this.lines) {
        const s = this.view.get(sid(l.key, l.runId)) ?? EMPTY;
        total += s.steps.length;
        const raw = this.xy(s, l.startTime);
        series.push(smoothing > 0 ? { xs: raw.xs, ys: emaDebiased(raw.ys, smoothing) } : raw);
        if (smoothing > 0) {
          const env = envelope(raw.xs, raw.ys, Math.max(10, this.points() / 2));
          series.push({ xs: raw.xs, ys: env.hi }, { xs: raw.xs, ys: env.lo });
        }
        entries.push({ name: l.name, color: l.color, group: l.group });
      }
      if (total <= 3 * cols) data = align(series) as uPlot.AlignedData;
      else {
        const [lo, hi] = this.domain(series);
        data = binAlign(series, lo, hi, cols) as uPlot.AlignedData;
      }
    }
    this.el.dataset.points = String(total);
    this.el.dataset.runs = String(this.grouped ? this.opts.groups!.reduce((a, g) => a + g.runs.length, 0) : this.lines.length);
    this.el.dataset.slots = String(data[0].length);
    const per = band ? 3 : 1;
    this.seriesOf = entries.map((_, i) => 1 + i * per);
    this.labels = entries.map((e) => e.name);
    this.drawLegend(entries, data);

    const keep = !resetScales && this.plot && this.zoom;
    if (this.plot && !this.needsRebuild(entries.length * per)) {
      this.plot.setData(data, !keep);
      if (keep && this.zoom) this.plot.setScale('x', { min: this.zoom.xmin, max: this.zoom.xmax });
      return;
    }
    this.plot?.destroy();
    const many = entries.length > LEGEND_MAX;
    const s: uPlot.Series[] = [{}];
    const uBands: uPlot.Band[] = [];
    for (const e of entries) {
      s.push({ label: e.name, stroke: e.color, width: many ? 1 : 1.5, points: { show: lonePoint, size: 7, fill: e.color }, spanGaps: true });
      if (band) {
        const hi = s.length;
        s.push({ stroke: 'transparent', width: 0, points: { show: false }, spanGaps: true });
        s.push({ stroke: 'transparent', width: 0, points: { show: false }, spanGaps: true });
        uBands.push({ series: [hi, hi + 1], fill: e.color + (this.grouped ? '38' : '30') });
      }
    }
    const xMode = this.opts.xMode;
    const { muted, grid } = themeColours();
    const opts: uPlot.Options = {
      width: this.width,
      height: this.height,
      legend: { show: false },
      pxAlign: 0,
      focus: { alpha: many ? 0.25 : 1 },
      cursor: {
        drag: { x: true, y: false, setScale: false },
        points: { show: false },
        bind: { dblclick: () => () => null },
        focus: { prox: many ? 24 : -1 },
      },
      scales: {
        x: { time: xMode === 'wall' },
        y: { distr: this.opts.log ? 3 : 1 },
      },
      axes: [
        {
          stroke: muted,
          grid: { stroke: grid, width: 1 },
          values: xMode === 'relative' ? (_u, splits) => splits.map((v) => fmtDuration(v * 1000)) : xMode === 'step' ? (_u, splits) => splits.map((v) => fmtNumber(v)) : undefined,
        },
        { stroke: muted, grid: { stroke: grid, width: 1 }, size: 64, values: (_u, splits) => splits.map((v) => fmtNumber(v)) },
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
        setSeries: [
          (u, si) => {
            this.focused = si;
            this.showCursor(u);
          },
        ],
      },
    };
    this.focused = null;
    this.plot = new uPlot(opts, data, this.plotHost);
    this.el.dataset.xMode = xMode;
    this.el.dataset.log = String(this.opts.log);
  }

  private needsRebuild(n: number): boolean {
    const p = this.plot!;
    return p.series.length !== 1 + n || (p.scales.y.distr === 3) !== this.opts.log || this.el.dataset.xMode !== this.opts.xMode;
  }

  private drawLegend(entries: { name: string; color: string; group?: string }[], data: uPlot.AlignedData): void {
    this.legendValues = [];
    if (entries.length === 0) {
      this.legend.textContent = 'no runs';
      return;
    }
    if (entries.length > LEGEND_MAX) {
      // A legend of 100 runs would fill the card: name the line under the cursor instead.
      const v = h('span', { class: 'legend-value legend-focus' }, `${entries.length} ${this.grouped ? 'groups' : 'lines'} · point at a line to name it`);
      this.legendValues.push(v);
      this.legend.replaceChildren(v);
      return;
    }
    const items = entries.map((e, i) => {
      const v = h('span', { class: 'legend-value' });
      this.legendValues.push(v);
      const ys = data[this.seriesOf[i]] as (number | null)[] | undefined;
      let last: number | null | undefined;
      if (ys) for (let k = ys.length - 1; k >= 0 && last == null; k--) last = ys[k];
      v.textContent = last != null ? fmtNumber(last) : '';
      const sw = h('i', { class: 'swatch' });
      sw.style.background = e.color; // CSSOM: inline style attributes are refused by the CSP
      return h('span', { class: 'legend-item', title: e.name }, sw, h('span', { class: 'legend-name' }, e.name), e.group ? h('span', { class: 'legend-group' }, e.group) : null, v);
    });
    this.legend.replaceChildren(...items);
  }

  private showCursor(u: uPlot): void {
    const idx = u.cursor.idx;
    const label = (x: number) => (this.opts.xMode === 'wall' ? fmtTime(x * 1000) : this.opts.xMode === 'relative' ? fmtDuration(x * 1000) : 'step ' + fmtNumber(Math.round(x)));
    if (this.labels.length > LEGEND_MAX) {
      const el = this.legendValues[0];
      const i = this.focused == null ? -1 : this.seriesOf.indexOf(this.focused);
      if (el && i >= 0 && idx != null) {
        const v = u.data[this.seriesOf[i]]?.[idx] as number | null | undefined;
        el.textContent = `${this.labels[i]}: ${v == null ? '–' : fmtNumber(v)} at ${label(u.data[0][idx])}`;
      }
    } else {
      this.seriesOf.forEach((si, i) => {
        const el = this.legendValues[i];
        if (!el) return;
        const v = idx == null ? null : (u.data[si]?.[idx] as number | null | undefined);
        el.textContent = v == null ? '' : fmtNumber(v);
      });
    }
    if (idx != null) this.status.textContent = (this.zoom ? 'zoomed · ' : '') + label(u.data[0][idx]);
  }
}
