// The run's time line: what the job did, on one time axis. Lanes, top to
// bottom: steps per second (from a metric's timestamps), the metric itself
// against time, every checkpoint save as a span (the part training was
// blocked, then the upload) and every load, the run's events (GPU health,
// idle and stalled spans, resumes), GPU utilisation and memory per GPU,
// and the log's density. Hovering shows what is under the pointer;
// clicking opens the log at that moment; dragging zooms, a double click
// goes back to the whole run.
//
// API: events/list (docs/api.md), gpu/series (docs/gpu.md), logs/density
// (docs/run.md), metrics/get-history-bulk-interval. Drawn on one canvas.

import { get, getHistoryBulkInterval, Run, SX } from '../api';
import { h, Scope } from '../dom';
import { colour, fmtBytes, fmtDuration, fmtNumber, fmtTime } from '../lib/format';
import { bucketMax, lineAt, LogDensity, stepsPerSecond, tickLabel, ticks } from '../lib/timeline';
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

/** ms formats a short duration: "900 ms", "2.4 s", else fmtDuration's. */
function ms(v: number): string {
  if (v < 1000) return Math.round(v) + ' ms';
  if (v < 60_000) return (v / 1000).toFixed(1) + ' s';
  return fmtDuration(v);
}

function css(el: Element, name: string, fallback: string): string {
  return getComputedStyle(el).getPropertyValue(name).trim() || fallback;
}

export class Timeline {
  readonly el: HTMLElement;
  private canvas: HTMLCanvasElement;
  private tip: HTMLElement;
  private metricSel: HTMLSelectElement;
  private status: HTMLElement;
  private events: TimelineEvent[] = [];
  private gpus: GPUSeries[] = [];
  private density: LogDensity | null = null;
  private metric: { key: string; points: { step: number; ts: number; value: number }[] } | null = null;
  private rates: [number, number][] = [];
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
    const keys = [...new Set(opts.run.data.metrics.map((m) => m.key).filter((k) => !k.startsWith('system/')))].sort();
    const preferred = keys.find((k) => /(^|\/)loss$/.test(k)) ?? keys[0] ?? '';
    this.metricSel = h('select', { 'aria-label': 'Metric', 'data-testid': 'timeline-metric' }, ...keys.map((k) => h('option', { value: k, selected: k === preferred }, k)));
    this.metricSel.addEventListener('change', () => void this.loadMetric(this.metricSel.value).then(() => this.draw()));
    this.el = h(
      'section',
      { class: 'timeline', 'data-testid': 'timeline' },
      h('div', { class: 'row timeline-head' }, h('h2', null, 'Timeline'), keys.length ? h('label', null, 'Metric ', this.metricSel) : null,
        h('button', { class: 'link', onclick: () => this.zoom(this.full[0], this.full[1]) }, 'Whole run'), this.status),
      h('div', { class: 'timeline-wrap' }, this.canvas, this.tip),
      h('p', { class: 'muted small' }, 'Checkpoints: dark while training was blocked, light while uploading, red failed, grey cut off or in progress; green a load. ' +
        'Events: red errors (Xid, ECC, a lost GPU), amber warnings (slowdowns, idle or stalled spans). ' +
        'Drag to zoom, double-click for the whole run; click a moment, a checkpoint or an event to open the log there.'),
    );
    this.bind();
    void this.load(preferred);
  }

  private async load(metricKey: string): Promise<void> {
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
    const [events, gpu, density] = await Promise.all([
      timed('events', evs().catch(() => [] as TimelineEvent[])),
      timed('gpu', get(SX + '/gpu/series', { run_id: id, from_ms: start, to_ms: end + 1, points: 720, fields: 'util,mem_used,mem_total' }).catch(() => ({ gpus: [] }))),
      timed('logs', get(SX + '/logs/density', { run_id: id, from_ms: start, to_ms: end + 1, buckets: 720 }).catch(() => null)),
      timed('metric', metricKey ? this.loadMetric(metricKey) : Promise.resolve()),
    ]);
    this.el.dataset.fetchEach = JSON.stringify(took);
    if (this.scope.disposed) return;
    const fetchMs = performance.now() - t;
    this.events = events;
    this.gpus = gpu.gpus ?? [];
    this.density = density;
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
    this.status.textContent = `${events.length} events · ${this.gpus.length} GPUs · ${fmtNumber(density?.total_lines ?? 0)} log lines`;
    perf('timeline-draw', total, id);
  }

  private async loadMetric(key: string): Promise<void> {
    const pts = await getHistoryBulkInterval([this.opts.run.info.run_id], key, 2000, null, false).catch(() => []);
    this.metric = { key, points: pts.map((p) => ({ step: p.step, ts: p.ts, value: p.value })).sort((a, b) => a.ts - b.ts) };
    this.rates = stepsPerSecond(this.metric.points);
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
      if (p.x < LEFT) return;
      const hit = this.hitAt(p.x, p.y);
      this.opts.onOpenLog(lineAt(this.density, hit ? hit.t : x2t(p.x)));
    }) as EventListener);
    this.scope.listen(c, 'dblclick', () => this.zoom(this.full[0], this.full[1]));
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
    this.draw(x);
    if (x < LEFT) {
      this.tip.hidden = true;
      return;
    }
    const hit = this.hitAt(x, y);
    const lane = this.lanes.find((l) => y >= l.y && y < l.y + l.h);
    let text = fmtTime(t);
    if (hit) text = hit.label;
    else if (lane) text += ' · ' + this.laneValue(lane.name, t);
    this.tip.textContent = text;
    this.tip.hidden = false;
    this.tip.style.left = Math.min(x + 12, this.canvas.clientWidth - 260) + 'px';
    this.tip.style.top = y + 14 + 'px';
  }

  private laneValue(name: string, t: number): string {
    const near = (pts: [number, number | null][]) => {
      let best: [number, number | null] | null = null;
      for (const p of pts) if (!best || Math.abs(p[0] - t) < Math.abs(best[0] - t)) best = p;
      return best;
    };
    switch (name) {
      case 'steps/s': {
        const p = near(this.rates);
        return p ? `${fmtNumber(Math.round((p[1] as number) * 100) / 100)} steps/s` : '';
      }
      case 'metric': {
        const p = near((this.metric?.points ?? []).map((q) => [q.ts, q.value] as [number, number]));
        return p ? `${this.metric?.key} = ${fmtNumber(p[1])}` : '';
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
    const spec = [{ name: 'steps/s', h: 54 }, { name: 'metric', h: 64 }, { name: 'checkpoints', h: 30 }, { name: 'events', h: 30 }, ...gpuLanes, { name: 'logs', h: 40 }];
    let y = AXIS_H;
    this.lanes = spec.map((s) => {
      const l = { ...s, y };
      y += s.h + 6;
      return l;
    });
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
      g.fillText(l.name === 'metric' ? this.metric?.key ?? 'metric' : l.name, 6, l.y + 14);
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
      for (const [t, v] of pts) {
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
    // Steps per second and the metric.
    {
      const l = lane('steps/s');
      const pts = bucketMax(this.rates.filter(([t]) => t >= v0 && t <= v1), v0, v1, PW);
      const [lo, hi] = range(pts.map((p) => p[1]));
      line(l, pts, colour(0), 0, hi * 1.05 || 1);
      g.fillStyle = muted;
      if (pts.length) g.fillText(fmtNumber(Math.round(hi * 100) / 100), LEFT + PW - 60, l.y + 12);
      void lo;
    }
    if (this.metric) {
      const l = lane('metric');
      const pts = this.metric.points.filter((p) => p.ts >= v0 && p.ts <= v1).map((p) => [p.ts, p.value] as [number, number]);
      const [lo, hi] = range(pts.map((p) => p[1]));
      line(l, pts, colour(1), lo, hi);
      g.fillStyle = muted;
      if (pts.length) g.fillText(`${fmtNumber(lo)} – ${fmtNumber(hi)}`, LEFT + PW - 120, l.y + 12);
    }
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
        const blocked = ck.blocked_ms != null && ck.blocked_ms >= 0 ? `, blocked ${ms(ck.blocked_ms)}` : '';
        const upload = e.end_ms && ck.blocked_ms != null && ck.blocked_ms >= 0 && ck.mode !== 'sync' ? `, upload ${ms(e.end_ms - e.time_ms - ck.blocked_ms)}` : '';
        this.hits.push({ x0, x1, y0: l.y, y1: l.y + l.h, t: e.time_ms,
          label: `${e.kind === 'checkpoint_load' ? 'load' : 'save'}${e.step != null ? ' step ' + e.step : ''}: ${outcome}${blocked}${upload}${ck.bytes ? ', ' + fmtBytes(ck.bytes) : ''}${ck.mode ? ' (' + ck.mode + (ck.staging ? '/' + ck.staging : '') + ')' : ''} · ${ck.path}${ck.error ? ' · ' + ck.error : ''}` });
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
