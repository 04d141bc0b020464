// The run's time line: what the job did, on one time axis. Lanes, top to
// bottom: steps per second (from the first metric's timestamps), the
// run's metrics against wall-clock time (a lane each: a loss and the next
// keys by default, or the ones picked), every checkpoint save as a span
// (the part training was blocked, then the upload) and every load, the
// run's events (GPU health, idle and stalled spans, resumes), GPU
// utilisation and memory per GPU, and the log's density. Hovering shows
// what is under the pointer; clicking opens the log at that moment;
// dragging zooms every lane together (the metrics are fetched again for
// the zoomed step range, at the lane's width), a double click goes back to
// the whole run.
//
// API: events/list (docs/api.md), gpu/series (docs/gpu.md), logs/density
// (docs/run.md), goodput (docs/run.md), metrics/get-history-bulk-interval. Drawn on one canvas.

import { get, getHistoryBulkInterval, Run, SX } from '../api';
import { h, Scope } from '../dom';
import { fmtMs, modeText, uploadMs } from '../lib/checkpoints';
import { fmtPct, getGoodput, goodputLine } from '../lib/goodput';
import { colour, fmtBytes, fmtDuration, fmtNumber, fmtTime } from '../lib/format';
import { naturalCompare } from '../lib/keys';
import { breakAtGaps, bucketMax, defaultMetricKeys, lineAt, LogDensity, nearestIndex, stepGap, StepPoint, stepRange, stepsPerSecond, tickLabel, ticks } from '../lib/timeline';
import { perf } from '../perf';

export interface TimelineEvent {
  seq: number;
  key: string;
  kind: string;
  severity?: string;
  time_ms: number;
  end_ms?: number;
  open?: boolean;
  node?: string;
  gpu?: number;
  step?: number;
  message?: string;
  checkpoint?: { path: string; outcome?: string; error?: string; bytes?: number; ranks?: number; mode?: string; blocked_ms?: number; staging?: string };
  attrs?: Record<string, string>;
}

interface GPUSeries {
  node: string;
  index: number;
  series: Record<string, [number, number | null][]>;
}

export interface TimelineOpts {
  run: Run;
  /** Opens the run's log at a line (the logs tab). */
  onOpenLog: (line: number) => void;
}

interface Lane {
  name: string;
  h: number;
  y: number;
}

interface Hit {
  x0: number;
  x1: number;
  y0: number;
  y1: number;
  t: number;
  label: string;
}

const AXIS_H = 22;
const LEFT = 110;
const RIGHT = 12;
const SEV_COLOUR: Record<string, string> = { error: '#c62828', warning: '#b26a00', info: '#2563eb' };

/** The most metric lanes: each costs a request and 56 px. */
export const MAX_METRIC_LANES = 8;
const METRIC_LANE_H = 56;
/** Points of a metric fetched for the whole run (minmax: each bucket's lowest and highest). */
const OVERVIEW_POINTS = 2000;

interface MPoint extends StepPoint {
  value: number;
}

/** A metric lane's points: the whole run, and the zoomed range at more detail. */
interface MSeries {
  key: string;
  points: MPoint[];
  ts: Float64Array;
  detail?: { from: number; to: number; points: MPoint[]; ts: Float64Array };
}

/** The palette's colours for the metric lanes (its grey left out; 0 is steps/s). */
const LANE_COLOURS = [1, 2, 3, 4, 5, 6, 8, 9];

const tsOf = (pts: MPoint[]) => Float64Array.from(pts, (p) => p.ts);

function storeKey(expId: string): string {
  return 'sextant.timeline.metrics.' + expId;
}

/** fit cuts text to width px, with an ellipsis. */
function fit(g: CanvasRenderingContext2D, text: string, width: number): string {
  if (g.measureText(text).width <= width) return text;
  let n = text.length;
  while (n > 1 && g.measureText(text.slice(0, n) + '…').width > width) n--;
  return text.slice(0, n) + '…';
}

function css(el: Element, name: string, fallback: string): string {
  return getComputedStyle(el).getPropertyValue(name).trim() || fallback;
}

export class Timeline {
  readonly el: HTMLElement;
  private canvas: HTMLCanvasElement;
  private tip: HTMLElement;
  private pickBtn: HTMLButtonElement;
  private status: HTMLElement;
  private gpuKey: HTMLElement;
  private events: TimelineEvent[] = [];
  /** The goodput line: cumulative goodput at each reference step's end (docs/run.md). */
  private goodput: [number, number][] = [];
  private gpus: GPUSeries[] = [];
  private density: LogDensity | null = null;
  /** Every metric key of the run (not system/), in natural order. */
  private keys: string[];
  /** The metrics shown, a lane each, in order. */
  private chosen: string[];
  private series = new Map<string, MSeries>();
  private rates: [number, number][] = [];
  private detailRates: { from: number; to: number; rates: [number, number][] } | null = null;
  private refineGen = 0;
  private refineTimer: ReturnType<typeof setTimeout> | undefined;
  private clickTimer: ReturnType<typeof setTimeout> | undefined;
  /** The pointer over the canvas, for the value marked on each metric lane. */
  private pointer: { x: number; y: number } | null = null;
  /** Each metric lane's value range as last drawn. */
  private scales = new Map<string, [number, number]>();
  private full: [number, number] = [0, 1];
  private view: [number, number] = [0, 1];
  private lanes: Lane[] = [];
  private hits: Hit[] = [];
  private drag: { x: number; now: number } | null = null;
  private t0 = performance.now();

  constructor(
    private opts: TimelineOpts,
    private scope: Scope,
  ) {
    this.canvas = h('canvas', { class: 'timeline-canvas', 'data-testid': 'timeline-canvas' });
    this.tip = h('div', { class: 'timeline-tip', hidden: true });
    this.status = h('span', { class: 'muted', 'data-testid': 'timeline-status' }, 'Loading…');
    this.gpuKey = h('div', { class: 'timeline-key', 'data-testid': 'timeline-gpu-key', hidden: true });
    this.keys = [...new Set(opts.run.data.metrics.map((m) => m.key).filter((k) => !k.startsWith('system/')))].sort(naturalCompare);
    this.chosen = this.storedChoice() ?? defaultMetricKeys(this.keys);
    this.pickBtn = h('button', { 'data-testid': 'timeline-metrics', 'aria-haspopup': 'dialog', onclick: () => this.picker() });
    this.pickLabel();
    this.el = h(
      'section',
      { class: 'timeline', 'data-testid': 'timeline' },
      h('div', { class: 'row timeline-head' }, h('h2', null, 'Timeline'), this.keys.length ? h('span', { class: 'timeline-pick' }, this.pickBtn) : null,
        h('button', { class: 'link', onclick: () => this.zoom(this.full[0], this.full[1]) }, 'Whole run'), this.status),
      h('div', { class: 'timeline-wrap' }, this.canvas, this.tip),
      this.gpuKey,
      h('p', { class: 'muted small' }, 'Metrics against wall-clock time, a lane each (Metrics picks them; steps/s from the first). ' +
        'Checkpoints: dark while training was blocked, light while uploading, red failed, grey cut off or in progress; green a load. ' +
        'Events: red errors (Xid, ECC, a lost GPU), amber warnings (slowdowns, idle or stalled spans). ' +
        'A gap in the data (a killed attempt before its resume, a GPU that stopped reporting) breaks the lines. ' +
        'Drag to zoom every lane, double-click for the whole run; click a moment, a checkpoint or an event to open the log there.'),
    );
    this.el.dataset.metrics = JSON.stringify(this.chosen);
    this.bind();
    this.scope.add(() => clearTimeout(this.refineTimer));
    void this.load();
  }

  /** storedChoice is the metrics picked for this experiment's runs, those this run has; null when none. */
  private storedChoice(): string[] | null {
    try {
      const v = JSON.parse(localStorage.getItem(storeKey(this.opts.run.info.experiment_id)) ?? 'null');
      if (!Array.isArray(v)) return null;
      const have = new Set(this.keys);
      const keys = v.filter((k): k is string => typeof k === 'string' && have.has(k)).slice(0, MAX_METRIC_LANES);
      return keys.length ? keys : null;
    } catch {
      return null;
    }
  }

  private pickLabel(): void {
    this.pickBtn.textContent = `Metrics (${this.chosen.length}) ▾`;
  }

  /** picker opens the list of the run's metrics to choose the lanes from. */
  private picker(): void {
    if (this.el.querySelector('.timeline-picker')) return;
    const panel = h('div', { class: 'col-picker timeline-picker', role: 'dialog', 'aria-label': 'Metrics on the timeline' });
    const find = h('input', { type: 'search', placeholder: 'Find a metric…', 'aria-label': 'Find a metric' });
    const note = h('p', { class: 'muted small' });
    const list = h('div', { class: 'col-lists' });
    const apply = (next: string[]) => {
      this.chosen = next;
      this.pickLabel();
      this.el.dataset.metrics = JSON.stringify(next);
      try {
        localStorage.setItem(storeKey(this.opts.run.info.experiment_id), JSON.stringify(next));
      } catch {
        /* private mode */
      }
      void this.loadMetrics(next.filter((k) => !this.series.has(k))).then(() => {
        this.computeRates();
        this.draw();
        this.refine();
      });
      this.draw();
      render();
    };
    const render = () => {
      const term = find.value.toLowerCase();
      const full = this.chosen.length >= MAX_METRIC_LANES;
      note.textContent = `${this.chosen.length} of at most ${MAX_METRIC_LANES} shown; steps/s comes from the first.`;
      // The chosen first, in lane order, then the others.
      const keys = [...this.chosen, ...this.keys.filter((k) => !this.chosen.includes(k))].filter((k) => k.toLowerCase().includes(term)).slice(0, 300);
      list.replaceChildren(
        ...keys.map((k) => {
          const on = this.chosen.includes(k);
          const box = h('input', { type: 'checkbox', checked: on, disabled: !on && full, 'data-key': k });
          box.addEventListener('change', () => apply(box.checked ? [...this.chosen, k] : this.chosen.filter((x) => x !== k)));
          return h('label', { class: 'col-option' }, box, k);
        }),
      );
    };
    find.addEventListener('input', render);
    render();
    const close = () => {
      panel.remove();
      document.removeEventListener('mousedown', outside);
    };
    const outside = (e: MouseEvent) => {
      if (!panel.contains(e.target as Node) && e.target !== this.pickBtn) close();
    };
    panel.append(
      h('div', { class: 'row' }, find, h('button', { onclick: () => apply(defaultMetricKeys(this.keys)) }, 'Default'), h('button', { onclick: close }, 'Close')),
      note,
      list,
    );
    this.pickBtn.after(panel);
    find.focus();
    setTimeout(() => document.addEventListener('mousedown', outside));
    this.scope.add(close);
  }

  private async load(): Promise<void> {
    const r = this.opts.run;
    const start = r.info.start_time || Date.now() - 3_600_000;
    const end = r.info.end_time || Date.now();
    const id = r.info.run_id;
    const evs = async () => {
      let after = 0;
      const out: TimelineEvent[] = [];
      for (let i = 0; i < 20; i++) {
        const p = await get(SX + '/events/list', { run_id: id, after_seq: after || undefined, limit: 10_000 });
        out.push(...(p.events ?? []));
        if (!p.next_seq) break;
        after = p.next_seq;
      }
      return out;
    };
    const t = performance.now();
    const took: Record<string, number> = {};
    const timed = <T>(name: string, p: Promise<T>) => p.finally(() => (took[name] = Math.round(performance.now() - t)));
    const [events, gpu, density, , gp] = await Promise.all([
      timed('events', evs().catch(() => [] as TimelineEvent[])),
      timed('gpu', get(SX + '/gpu/series', { run_id: id, from_ms: start, to_ms: end + 1, points: 720, fields: 'util,mem_used,mem_total' }).catch(() => ({ gpus: [] }))),
      timed('logs', get(SX + '/logs/density', { run_id: id, from_ms: start, to_ms: end + 1, buckets: 720 }).catch(() => null)),
      timed('metrics', this.loadMetrics(this.chosen)),
      timed('goodput', getGoodput(id).catch(() => null)),
    ]);
    this.computeRates();
    this.el.dataset.fetchEach = JSON.stringify(took);
    if (this.scope.disposed) return;
    const fetchMs = performance.now() - t;
    this.events = events;
    this.gpus = gpu.gpus ?? [];
    this.density = density;
    this.goodput = goodputLine(gp);
    const last = this.goodput[this.goodput.length - 1];
    this.el.dataset.goodput = JSON.stringify({ points: this.goodput.length, last: last ? last[1] : null, run: gp?.goodput ?? null });
    let lo = start;
    let hi = end;
    for (const e of events) {
      lo = Math.min(lo, e.time_ms);
      hi = Math.max(hi, e.end_ms || e.time_ms);
    }
    this.full = [lo, Math.max(hi, lo + 1000)];
    this.view = [...this.full];
    const d0 = performance.now();
    this.draw();
    const drawMs = performance.now() - d0;
    const total = performance.now() - this.t0;
    this.el.dataset.fetchMs = String(Math.round(fetchMs));
    this.el.dataset.renderMs = String(Math.round(drawMs * 10) / 10);
    this.el.dataset.drawMs = String(Math.round(total));
    this.el.dataset.events = String(events.length);
    this.el.dataset.gpus = String(this.gpus.length);
    this.el.dataset.logLines = String(density?.total_lines ?? 0);
    this.showGPUKey();
    this.status.textContent = `${events.length} events · ${this.gpus.length} GPUs · ${fmtNumber(density?.total_lines ?? 0)} log lines`;
    perf('timeline-draw', total, id);
  }

  /** showGPUKey names the colour of each GPU's lines in the GPU lanes. */
  private showGPUKey(): void {
    const nodes = new Set(this.gpus.map((g) => g.node));
    this.gpuKey.hidden = this.gpus.length === 0;
    this.gpuKey.replaceChildren(
      h('span', { class: 'muted' }, 'GPU lanes:'),
      ...this.gpus.map((g, i) => {
        const sw = h('i', { class: 'swatch' });
        sw.style.background = colour(i); // CSSOM: inline style attributes are refused by the CSP
        return h('span', { class: 'key-item' }, sw, (nodes.size > 1 ? g.node + ' ' : '') + 'GPU ' + g.index);
      }),
    );
  }

  /** loadMetrics fetches the whole run of each key (in parallel). */
  private async loadMetrics(keys: string[]): Promise<void> {
    const id = this.opts.run.info.run_id;
    await Promise.all(
      keys.map(async (key) => {
        const pts = await getHistoryBulkInterval([id], key, OVERVIEW_POINTS, null, true).catch(() => []);
        if (this.scope.disposed) return;
        const points = pts.map((p) => ({ step: p.step, ts: p.ts, value: p.value })).sort((a, b) => a.ts - b.ts || a.step - b.step);
        this.series.set(key, { key, points, ts: tsOf(points) });
      }),
    );
  }

  /** computeRates derives steps per second from the first metric shown. */
  private computeRates(): void {
    const s = this.series.get(this.chosen[0] ?? '');
    this.rates = s ? stepsPerSecond(s.points, stepGap(s.points)) : [];
    const d = s?.detail;
    this.detailRates = d ? { from: d.from, to: d.to, rates: stepsPerSecond(d.points, stepGap(d.points)) } : null;
  }

  /** pointsOf is what a metric lane draws for the view: the zoomed detail when it covers the view, else the whole run. */
  private pointsOf(s: MSeries): { points: MPoint[]; ts: Float64Array } {
    const d = s.detail;
    if (d && d.from <= this.view[0] && d.to >= this.view[1]) return d;
    return s;
  }

  /** ratesOfView is steps per second from the zoomed detail when it covers the view, else from the whole run. */
  private ratesOfView(): [number, number][] {
    const d = this.detailRates;
    return d && d.from <= this.view[0] && d.to >= this.view[1] ? d.rates : this.rates;
  }

  /**
   * refine fetches, for a zoomed view, each metric's points in the view's
   * step range at the lane's width (minmax), so the lanes show the detail
   * of the moment zoomed into; the whole run needs none.
   */
  private refine(): void {
    clearTimeout(this.refineTimer);
    const [v0, v1] = this.view;
    if (v0 <= this.full[0] && v1 >= this.full[1]) return;
    const gen = ++this.refineGen;
    this.refineTimer = setTimeout(() => {
      const width = Math.max(100, this.canvas.clientWidth - LEFT - RIGHT);
      const id = this.opts.run.info.run_id;
      const want = this.chosen.map((k) => this.series.get(k)).filter((s): s is MSeries => !!s && s.points.length > 0 && !(s.detail && s.detail.from <= v0 && s.detail.to >= v1));
      void Promise.all(
        want.map(async (s) => {
          const range = stepRange(s.points, v0, v1);
          if (!range) return;
          const pts = await getHistoryBulkInterval([id], s.key, width, range, true).catch(() => null);
          if (!pts || gen !== this.refineGen || this.scope.disposed) return;
          const points = pts.map((p) => ({ step: p.step, ts: p.ts, value: p.value })).sort((a, b) => a.ts - b.ts || a.step - b.step);
          s.detail = { from: v0, to: v1, points, ts: tsOf(points) };
        }),
      ).then(() => {
        if (gen !== this.refineGen || this.scope.disposed || !want.length) return;
        this.computeRates();
        this.draw();
        this.el.dataset.refined = String(gen);
      });
    }, 120);
  }

  private bind(): void {
    const c = this.canvas;
    const x2t = (x: number) => this.view[0] + ((x - LEFT) / Math.max(1, c.clientWidth - LEFT - RIGHT)) * (this.view[1] - this.view[0]);
    const pos = (e: MouseEvent) => {
      const r = c.getBoundingClientRect();
      return { x: e.clientX - r.left, y: e.clientY - r.top };
    };
    this.scope.listen(c, 'mousedown', ((e: MouseEvent) => {
      const p = pos(e);
      if (p.x >= LEFT) this.drag = { x: p.x, now: p.x };
    }) as EventListener);
    this.scope.listen(c, 'mousemove', ((e: MouseEvent) => {
      const p = pos(e);
      if (this.drag) {
        this.drag.now = p.x;
        this.draw();
        return;
      }
      this.hover(p.x, p.y, x2t(p.x));
    }) as EventListener);
    this.scope.listen(c, 'mouseleave', () => {
      this.tip.hidden = true;
      this.pointer = null;
      this.drag = null;
      this.draw();
    });
    this.scope.listen(c, 'mouseup', ((e: MouseEvent) => {
      const p = pos(e);
      const d = this.drag;
      this.drag = null;
      if (d && Math.abs(p.x - d.x) > 5) {
        const a = x2t(Math.min(p.x, d.x));
        const b = x2t(Math.max(p.x, d.x));
        this.zoom(a, b);
        return;
      }
      if (p.x < LEFT || e.detail > 1) return;
      // A click opens the log, unless a second click makes it a double
      // click (the whole run again): wait for that long.
      const hit = this.hitAt(p.x, p.y);
      const t = hit ? hit.t : x2t(p.x);
      clearTimeout(this.clickTimer);
      this.clickTimer = setTimeout(() => this.opts.onOpenLog(lineAt(this.density, t)), 250);
    }) as EventListener);
    this.scope.listen(c, 'dblclick', () => {
      clearTimeout(this.clickTimer);
      this.zoom(this.full[0], this.full[1]);
    });
    this.scope.add(() => clearTimeout(this.clickTimer));
    const ro = new ResizeObserver(() => this.draw());
    ro.observe(this.el);
    this.scope.add(() => ro.disconnect());
  }

  private zoom(a: number, b: number): void {
    if (b - a < 1000) b = a + 1000;
    this.view = [a, b];
    const t = performance.now();
    this.draw();
    this.el.dataset.zoomMs = String(Math.round((performance.now() - t) * 10) / 10);
    this.refine();
  }

  private hitAt(x: number, y: number): Hit | null {
    let best: Hit | null = null;
    for (const hh of this.hits) {
      if (y >= hh.y0 && y <= hh.y1 && x >= hh.x0 - 3 && x <= hh.x1 + 3) {
        if (!best || hh.x1 - hh.x0 < best.x1 - best.x0) best = hh;
      }
    }
    return best;
  }

  private hover(x: number, y: number, t: number): void {
    this.pointer = { x, y };
    this.draw(x);
    if (x < LEFT) {
      this.tip.hidden = true;
      return;
    }
    const hit = this.hitAt(x, y);
    const lane = this.lanes.find((l) => y >= l.y && y < l.y + l.h);
    let text = fmtTime(t);
    if (hit) text = hit.label;
    else if (lane) text += ' · ' + this.laneValue(lane.name, t, x, y);
    this.tip.textContent = text;
    this.tip.hidden = false;
    this.tip.style.left = Math.min(x + 12, this.canvas.clientWidth - 260) + 'px';
    this.tip.style.top = y + 14 + 'px';
  }

  /**
   * metricAt is the index of the point of a metric lane under the pointer
   * (x, y): of the points drawn within 3 px of x, the one drawn nearest y
   * (so a one-step spike among dense points can be pointed at); else the
   * point nearest in time; -1 for none.
   */
  private metricAt(s: MSeries, x: number, y: number): number {
    const { points, ts } = this.pointsOf(s);
    const sc = this.scales.get(s.key);
    const l = this.lanes.find((q) => q.name === 'metric:' + s.key);
    if (!points.length || !sc || !l) return -1;
    const [v0, v1] = this.view;
    const PW = Math.max(1, this.canvas.clientWidth - LEFT - RIGHT);
    const X = (tt: number) => LEFT + ((tt - v0) / (v1 - v0)) * PW;
    const Y = (v: number) => l.y + l.h - 3 - ((v - sc[0]) / (sc[1] - sc[0] || 1)) * (l.h - 6);
    const t = v0 + ((x - LEFT) / PW) * (v1 - v0);
    const near = nearestIndex(ts, t);
    let best = -1;
    let bestD = Infinity;
    for (const dir of [-1, 1]) {
      for (let i = dir < 0 ? near : near + 1; i >= 0 && i < points.length && Math.abs(X(ts[i]) - x) <= 3; i += dir) {
        const v = points[i].value;
        if (!Number.isFinite(v)) continue;
        const d = Math.abs(Y(v) - y);
        if (d < bestD) (best = i), (bestD = d);
      }
    }
    return best >= 0 ? best : near;
  }

  private laneValue(name: string, t: number, x: number, y: number): string {
    const near = (pts: [number, number | null][]) => {
      let best: [number, number | null] | null = null;
      for (const p of pts) if (!best || Math.abs(p[0] - t) < Math.abs(best[0] - t)) best = p;
      return best;
    };
    if (name.startsWith('metric:')) {
      const s = this.series.get(name.slice(7));
      if (!s) return '';
      const { points } = this.pointsOf(s);
      const i = this.metricAt(s, x, y);
      return i < 0 ? '' : `${s.key} = ${fmtNumber(points[i].value)} at step ${points[i].step} (${fmtTime(points[i].ts)})`;
    }
    switch (name) {
      case 'steps/s': {
        const p = near(this.ratesOfView());
        return p ? `${fmtNumber(Math.round((p[1] as number) * 100) / 100)} steps/s (from ${this.chosen[0]})` : '';
      }
      case 'goodput': {
        const p = near(this.goodput);
        return p ? `goodput ${fmtPct(p[1] as number)} so far (${fmtTime(p[0])})` : '';
      }
      case 'GPU util':
        return this.gpus.map((g) => `GPU ${g.index}: ${fmtNumber(near(g.series.util ?? [])?.[1] ?? null)}%`).join(', ');
      case 'GPU memory':
        return this.gpus.map((g) => `GPU ${g.index}: ${fmtBytes(near(g.series.mem_used ?? [])?.[1] ?? null)}`).join(', ');
      case 'logs': {
        const d = this.density;
        if (!d) return '';
        const b = Math.floor((t - d.from_ms) / d.bucket_ms);
        return `${fmtNumber(d.lines[b] ?? 0)} lines in ${fmtDuration(d.bucket_ms)} · line ${lineAt(d, t)}`;
      }
    }
    return '';
  }

  /** draw renders every lane for the current view; cursor is the pointer's x. */
  private draw(cursor?: number): void {
    const c = this.canvas;
    const W = Math.max(300, this.el.clientWidth || 900);
    const gpuLanes = this.gpus.length ? [{ name: 'GPU util', h: 90 }, { name: 'GPU memory', h: 60 }] : [];
    const metricLanes = this.chosen.map((k) => ({ name: 'metric:' + k, h: METRIC_LANE_H }));
    const goodputLane = this.goodput.length ? [{ name: 'goodput', h: 40 }] : [];
    const spec = [{ name: 'steps/s', h: 54 }, ...goodputLane, ...metricLanes, { name: 'checkpoints', h: 30 }, { name: 'events', h: 30 }, ...gpuLanes, { name: 'logs', h: 40 }];
    let y = AXIS_H;
    this.lanes = spec.map((s) => {
      const l = { ...s, y };
      y += s.h + 6;
      return l;
    });
    const laneAttr = JSON.stringify(this.lanes);
    if (this.el.dataset.lanes !== laneAttr) this.el.dataset.lanes = laneAttr;
    this.el.dataset.view = `${Math.round(this.view[0])},${Math.round(this.view[1])}`;
    const H = y + 4;
    const dpr = window.devicePixelRatio || 1;
    if (c.width !== Math.round(W * dpr) || c.height !== Math.round(H * dpr)) {
      c.width = Math.round(W * dpr);
      c.height = Math.round(H * dpr);
      c.style.width = W + 'px';
      c.style.height = H + 'px';
    }
    const g = c.getContext('2d');
    if (!g) return;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    const fg = css(this.el, '--fg', '#1d2330');
    const muted = css(this.el, '--muted', '#6b7280');
    const grid = css(this.el, '--grid', '#eceef2');
    g.clearRect(0, 0, W, H);
    g.font = '11px system-ui, sans-serif';
    const [v0, v1] = this.view;
    const PW = W - LEFT - RIGHT;
    const X = (t: number) => LEFT + ((t - v0) / (v1 - v0)) * PW;
    const visible = (a: number, b: number) => b >= v0 && a <= v1;
    this.hits = [];
    // Axis and grid.
    const tk = ticks(v0, v1, PW);
    g.fillStyle = muted;
    g.strokeStyle = grid;
    g.lineWidth = 1;
    for (const t of tk.times) {
      const x = Math.round(X(t)) + 0.5;
      g.beginPath();
      g.moveTo(x, AXIS_H - 4);
      g.lineTo(x, H);
      g.stroke();
      g.fillText(tickLabel(t, tk.step), x + 3, 12);
    }
    for (const l of this.lanes) {
      g.fillStyle = fg;
      g.fillText(fit(g, l.name.startsWith('metric:') ? l.name.slice(7) : l.name, LEFT - 10), 6, l.y + 14);
      g.strokeStyle = grid;
      g.strokeRect(LEFT + 0.5, l.y + 0.5, PW, l.h);
    }
    const lane = (n: string) => this.lanes.find((l) => l.name === n)!;
    const line = (l: Lane, pts: [number, number | null][], col: string, lo: number, hi: number) => {
      const span = hi - lo || 1;
      g.strokeStyle = col;
      g.lineWidth = 1.25;
      g.beginPath();
      let pen = false;
      // A gap (a killed attempt before its resume, a GPU that stopped
      // reporting) breaks the line: drawn across, it would look like work.
      for (const [t, v] of breakAtGaps(pts)) {
        if (v == null || !Number.isFinite(v) || t < v0 - (v1 - v0) || t > v1 + (v1 - v0)) {
          pen = false;
          continue;
        }
        const px = X(t);
        const py = l.y + l.h - 3 - ((v - lo) / span) * (l.h - 6);
        if (pen) g.lineTo(px, py);
        else g.moveTo(px, py);
        pen = true;
      }
      g.stroke();
    };
    const range = (vals: number[]) => {
      let lo = Infinity;
      let hi = -Infinity;
      for (const v of vals) if (Number.isFinite(v)) (lo = Math.min(lo, v)), (hi = Math.max(hi, v));
      return lo === Infinity ? [0, 1] : [lo, hi];
    };
    // Lanes draw inside the plot area only (a zoomed view's lines reach
    // beyond it); the metric lanes' scales go in the gutter after.
    const scales: [string, number][] = [];
    g.save();
    g.beginPath();
    g.rect(LEFT, AXIS_H, PW + 1, H - AXIS_H);
    g.clip();
    // Steps per second, then a lane per metric.
    {
      const l = lane('steps/s');
      const pts = bucketMax(this.ratesOfView().filter(([t]) => t >= v0 && t <= v1), v0, v1, PW);
      const [, hi] = range(pts.map((p) => p[1]));
      line(l, pts, colour(0), 0, hi * 1.05 || 1);
      g.fillStyle = muted;
      if (pts.length) g.fillText(fmtNumber(Math.round(hi * 100) / 100), LEFT + PW - 60, l.y + 12);
    }
    // Goodput: the share of the wall time so far spent in productive steps, 0 to 100%.
    if (this.goodput.length) {
      const l = lane('goodput');
      line(l, this.goodput, colour(2), 0, 1);
      g.fillStyle = muted;
      g.fillText(fmtPct(this.goodput[this.goodput.length - 1][1]), LEFT + PW - 60, l.y + 12);
    }
    this.chosen.forEach((key, i) => {
      const s = this.series.get(key);
      const l = lane('metric:' + key);
      if (!s) return;
      const { points, ts } = this.pointsOf(s);
      // The points in view and one beyond each edge, so the line reaches them.
      const a = Math.max(0, nearestIndex(ts, v0) - 1);
      const b = Math.min(points.length, nearestIndex(ts, v1) + 2);
      const pts: [number, number][] = [];
      for (let j = a; j < b; j++) pts.push([points[j].ts, points[j].value]);
      const [lo0, hi0] = range(pts.filter(([t]) => t >= v0 && t <= v1).map((p) => p[1]));
      // A flat line goes across the middle.
      const [lo, hi] = hi0 > lo0 ? [lo0, hi0] : [lo0 - 1, hi0 + 1];
      const col = colour(LANE_COLOURS[i % LANE_COLOURS.length]);
      this.scales.set(key, [lo, hi]);
      line(l, pts, col, lo, hi);
      // The lane's scale, in the gutter: its highest value at the top, its lowest at the bottom.
      if (!pts.length) {
        g.fillStyle = muted;
        g.fillText('no points', LEFT + 4, l.y + 14);
      } else if (hi0 > lo0) scales.push([fmtNumber(hi0), l.y + 28], [fmtNumber(lo0), l.y + l.h - 2]);
      else scales.push([fmtNumber(hi0), l.y + l.h / 2 + 4]);
      // The value under the pointer.
      if (cursor != null && cursor >= LEFT && !this.drag && pts.length) {
        // In the lane pointed at, the point pointed at; in the others, the one nearest in time.
        const p = this.pointer;
        const k = p && p.y >= l.y && p.y < l.y + l.h ? this.metricAt(s, cursor, p.y) : nearestIndex(ts, v0 + ((cursor - LEFT) / PW) * (v1 - v0));
        const v = points[k]?.value;
        if (v != null && Number.isFinite(v) && Math.abs(X(points[k].ts) - cursor) < 40) {
          const span = hi - lo || 1;
          g.fillStyle = col;
          g.beginPath();
          g.arc(X(points[k].ts), l.y + l.h - 3 - ((v - lo) / span) * (l.h - 6), 3, 0, 2 * Math.PI);
          g.fill();
        }
      }
    });
    // Checkpoints: blocked part dark, upload light; failed red; cut off grey.
    {
      const l = lane('checkpoints');
      for (const e of this.events) {
        if (e.kind !== 'checkpoint_save' && e.kind !== 'checkpoint_load') continue;
        const end = e.end_ms || (e.open ? Date.now() : e.time_ms);
        if (!visible(e.time_ms, end)) continue;
        const x0 = X(e.time_ms);
        const x1 = Math.max(X(end), x0 + 2);
        const ck = e.checkpoint ?? { path: '' };
        const outcome = ck.outcome ?? 'complete';
        const top = l.y + 4;
        const hgt = l.h - 8;
        if (e.kind === 'checkpoint_load') {
          g.fillStyle = '#2e7d32';
          g.fillRect(x0, top, x1 - x0, hgt);
        } else {
          g.fillStyle = outcome === 'failed' ? '#e57373' : outcome === 'complete' ? '#90caf9' : '#bdbdbd';
          g.fillRect(x0, top, x1 - x0, hgt);
          if (ck.blocked_ms != null && ck.blocked_ms >= 0) {
            g.fillStyle = outcome === 'failed' ? '#c62828' : '#1565c0';
            g.fillRect(x0, top, Math.max(X(e.time_ms + ck.blocked_ms) - x0, 1.5), hgt);
          }
        }
        const blocked = ck.blocked_ms != null && ck.blocked_ms >= 0 ? `, blocked ${fmtMs(ck.blocked_ms)}` : '';
        const up = uploadMs(e);
        const upload = up != null ? `, upload ${fmtMs(up)}` : '';
        const mode = modeText(ck);
        this.hits.push({ x0, x1, y0: l.y, y1: l.y + l.h, t: e.time_ms,
          label: `${e.kind === 'checkpoint_load' ? 'load' : 'save'}${e.step != null ? ' step ' + e.step : ''}: ${outcome}${blocked}${upload}${ck.bytes ? ', ' + fmtBytes(ck.bytes) : ''}${mode ? ' (' + mode + ')' : ''} · ${ck.path}${ck.error ? ' · ' + ck.error : ''}` });
      }
    }
    // Events: spans as bars, instants as ticks, by severity.
    {
      const l = lane('events');
      for (const e of this.events) {
        if (e.kind === 'checkpoint_save' || e.kind === 'checkpoint_load') continue;
        const end = e.end_ms || (e.open ? Date.now() : 0);
        const col = SEV_COLOUR[e.severity ?? 'info'] ?? SEV_COLOUR.info;
        const x0 = X(e.time_ms);
        if (end && end > e.time_ms) {
          if (!visible(e.time_ms, end)) continue;
          g.fillStyle = col + '55';
          g.fillRect(x0, l.y + 6, Math.max(X(end) - x0, 2), l.h - 12);
          this.hits.push({ x0, x1: X(end), y0: l.y, y1: l.y + l.h, t: e.time_ms, label: `${e.kind}: ${e.message ?? ''} (${fmtTime(e.time_ms)}${e.open ? ', still going on' : ', ' + fmtDuration(end - e.time_ms)})` });
        } else {
          if (!visible(e.time_ms, e.time_ms)) continue;
          g.fillStyle = col;
          g.beginPath();
          g.moveTo(x0, l.y + 5);
          g.lineTo(x0 - 4, l.y + l.h - 5);
          g.lineTo(x0 + 4, l.y + l.h - 5);
          g.closePath();
          g.fill();
          this.hits.push({ x0: x0 - 4, x1: x0 + 4, y0: l.y, y1: l.y + l.h, t: e.time_ms, label: `${e.kind}${e.gpu != null ? ' GPU ' + e.gpu : ''}: ${e.message ?? ''} (${fmtTime(e.time_ms)})` });
        }
      }
    }
    // GPUs: a line per GPU.
    if (this.gpus.length) {
      const lu = lane('GPU util');
      const lm = lane('GPU memory');
      this.gpus.forEach((gp, i) => {
        line(lu, gp.series.util ?? [], colour(i), 0, 100);
        const total = gp.series.mem_total ?? [];
        const tot = total.length ? (total[total.length - 1][1] ?? 0) : 0;
        line(lm, gp.series.mem_used ?? [], colour(i), 0, tot || Math.max(...(gp.series.mem_used ?? []).map((p) => p[1] ?? 0), 1));
      });
    }
    // Log density: bars.
    if (this.density && this.density.lines.length) {
      const l = lane('logs');
      const d = this.density;
      let peak = 1;
      for (let b = 0; b < d.lines.length; b++) {
        const t = d.from_ms + b * d.bucket_ms;
        if (visible(t, t + d.bucket_ms)) peak = Math.max(peak, d.lines[b]);
      }
      g.fillStyle = muted;
      for (let b = 0; b < d.lines.length; b++) {
        const t = d.from_ms + b * d.bucket_ms;
        if (!d.lines[b] || !visible(t, t + d.bucket_ms)) continue;
        const x0 = X(t);
        const bh = (d.lines[b] / peak) * (l.h - 4);
        g.fillRect(x0, l.y + l.h - 2 - bh, Math.max(X(t + d.bucket_ms) - x0 - 0.5, 1), bh);
      }
    }
    g.restore();
    g.fillStyle = muted;
    g.textAlign = 'right';
    for (const [text, y] of scales) g.fillText(fit(g, text, LEFT - 12), LEFT - 4, y);
    g.textAlign = 'left';
    // The pointer, and the zoom being dragged.
    if (this.drag) {
      g.fillStyle = css(this.el, '--sel', '#dbe7ff') + '';
      g.globalAlpha = 0.5;
      g.fillRect(Math.min(this.drag.x, this.drag.now), AXIS_H, Math.abs(this.drag.now - this.drag.x), H - AXIS_H);
      g.globalAlpha = 1;
    } else if (cursor != null && cursor >= LEFT) {
      g.strokeStyle = fg;
      g.beginPath();
      g.moveTo(cursor + 0.5, AXIS_H);
      g.lineTo(cursor + 0.5, H);
      g.stroke();
    }
  }
}

/** gpuHealthList lists a run's GPU health events (for the GPU tab). */
export function gpuHealthList(runId: string, scope: Scope, onOpenLog: (t: number) => void): HTMLElement {
  const body = h('div', null, h('p', { class: 'muted' }, 'Loading GPU health events…'));
  const el = h('section', { class: 'gpu-health', 'data-testid': 'gpu-health' }, h('h2', null, 'GPU health events'), body);
  get(SX + '/events/list', { run_id: runId, kind: 'gpu_xid,gpu_throttle,gpu_ecc,gpu_lost', limit: 10_000 })
    .then((p: { events?: TimelineEvent[] }) => {
      if (scope.disposed) return;
      const evs = (p.events ?? []).sort((a, b) => a.time_ms - b.time_ms);
      if (!evs.length) {
        body.replaceChildren(h('p', { class: 'empty' }, 'No Xid errors, slowdowns, ECC errors or lost GPUs recorded for this run.'));
        return;
      }
      body.replaceChildren(
        h('table', { class: 'grid' },
          h('thead', null, h('tr', null, h('th', null, 'Time'), h('th', null, 'Node'), h('th', null, 'GPU'), h('th', null, 'Event'), h('th', null, 'What happened'))),
          h('tbody', null, evs.map((e) =>
            h('tr', { class: 'sev-' + (e.severity ?? 'info') },
              h('td', null, h('button', { class: 'link', onclick: () => onOpenLog(e.time_ms) }, fmtTime(e.time_ms))),
              h('td', null, e.node ?? ''),
              h('td', null, e.gpu != null ? String(e.gpu) : ''),
              h('td', null, e.kind.replace('gpu_', '')),
              h('td', null, (e.message ?? '') + (e.end_ms ? ` (for ${fmtDuration(e.end_ms - e.time_ms)})` : e.open ? ' (still going on)' : '')),
            ),
          )),
        ),
      );
    })
    .catch((err) => !scope.disposed && body.replaceChildren(h('p', { class: 'error-text' }, String(err?.message ?? err))));
  return el;
}
