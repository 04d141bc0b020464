// Plots of runs against their params and latest metrics: parallel
// coordinates (an axis per param or metric, a line per run, coloured by the
// last axis or by the run's group) and a scatter plot (a param or metric on
// each axis, a point per run). Both draw on a canvas; pointing at a line or
// a point names its run, clicking opens it. Every label is drawn as canvas
// text or set as textContent.

import type { Run } from '../api';
import { h, Scope } from '../dom';
import { fmtNumber } from '../lib/format';
import { naturalCompare } from '../lib/keys';
import { navigate } from '../router';

/** An axis: a param or a metric (its latest value). */
export interface Dim {
  kind: 'param' | 'metric';
  key: string;
}

const dimId = (d: Dim) => (d.kind === 'param' ? 'params.' : 'metrics.') + d.key;
const dimOf = (id: string): Dim | null => {
  const m = /^(params|metrics)\.(.+)$/.exec(id);
  return m ? { kind: m[1] === 'params' ? 'param' : 'metric', key: m[2] } : null;
};

interface Scale {
  /** position in [0, 1] of a run's value, or null when it has none */
  pos: (r: Run) => number | null;
  ticks: { at: number; label: string }[];
  label: string;
}

function rawValue(r: Run, d: Dim): string | number | undefined {
  if (d.kind === 'param') return r.data.params.find((p) => p.key === d.key)?.value;
  return r.data.metrics.find((m) => m.key === d.key)?.value;
}

/** scaleOf is a numeric axis when every value is a finite number, else a categorical one. */
export function scaleOf(runs: readonly Run[], d: Dim): Scale {
  const vals = runs.map((r) => rawValue(r, d));
  const present = vals.filter((v) => v !== undefined && v !== '') as (string | number)[];
  const nums = present.map((v) => (typeof v === 'number' ? v : Number(v)));
  const numeric = present.length > 0 && nums.every((n) => Number.isFinite(n));
  const label = dimId(d);
  if (numeric) {
    let lo = Math.min(...nums);
    let hi = Math.max(...nums);
    if (!(hi > lo)) (lo -= 1), (hi += 1);
    const at = (v: number) => (v - lo) / (hi - lo);
    const ticks = [0, 0.25, 0.5, 0.75, 1].map((t) => ({ at: t, label: fmtNumber(lo + t * (hi - lo)) }));
    return {
      pos: (r) => {
        const v = rawValue(r, d);
        const n = typeof v === 'number' ? v : v === undefined || v === '' ? NaN : Number(v);
        return Number.isFinite(n) ? at(n) : null;
      },
      ticks,
      label,
    };
  }
  const cats = [...new Set(present.map(String))].sort(naturalCompare);
  const idx = new Map(cats.map((c, i) => [c, i]));
  const at = (i: number) => (cats.length === 1 ? 0.5 : i / (cats.length - 1));
  return {
    pos: (r) => {
      const v = rawValue(r, d);
      return v === undefined || v === '' ? null : at(idx.get(String(v))!);
    },
    ticks: cats.slice(0, 40).map((c, i) => ({ at: at(i), label: c.length > 18 ? c.slice(0, 17) + '…' : c })),
    label,
  };
}

/** dims lists the params and (non-system) metrics the runs have, params first, in natural order. */
export function dimsOf(runs: readonly Run[]): Dim[] {
  const params = new Set<string>();
  const metrics = new Set<string>();
  for (const r of runs) {
    for (const p of r.data.params) params.add(p.key);
    for (const m of r.data.metrics) if (!m.key.startsWith('system/')) metrics.add(m.key);
  }
  return [...[...params].sort(naturalCompare).map((key) => ({ kind: 'param' as const, key })), ...[...metrics].sort(naturalCompare).map((key) => ({ kind: 'metric' as const, key }))];
}

/** defaultAxes: the params whose values differ (up to 5), then one metric (a loss if there is one). */
export function defaultAxes(runs: readonly Run[], all: readonly Dim[]): Dim[] {
  const varying = all.filter((d) => d.kind === 'param' && new Set(runs.map((r) => String(rawValue(r, d) ?? ''))).size > 1).slice(0, 5);
  const metrics = all.filter((d) => d.kind === 'metric');
  const m = metrics.find((d) => /loss/i.test(d.key)) ?? metrics[0];
  return m ? [...varying, m] : varying;
}

/** fitText shortens s with an ellipsis to at most w px. */
function fitText(ctx: CanvasRenderingContext2D, s: string, w: number): string {
  if (ctx.measureText(s).width <= w) return s;
  let n = s.length;
  while (n > 1 && ctx.measureText(s.slice(0, n) + '…').width > w) n--;
  return s.slice(0, n) + '…';
}

/** varies says whether the runs have more than one value of d (a run without it counts as a value). */
function varies(runs: readonly Run[], d: Dim): boolean {
  return new Set(runs.map((r) => String(rawValue(r, d) ?? ''))).size > 1;
}

/**
 * scatterDefaults picks the scatter plot's axes: x the first param whose
 * values differ (else the first metric that differs, else the first
 * param), y a loss, else the first metric, that differs when one does;
 * never the same as x when there is another. Ids as dimId gives them.
 */
export function scatterDefaults(runs: readonly Run[], all: readonly Dim[]): [string, string] {
  const params = all.filter((d) => d.kind === 'param');
  const metrics = all.filter((d) => d.kind === 'metric');
  const vp = params.filter((d) => varies(runs, d));
  const vm = metrics.filter((d) => varies(runs, d));
  const x = vp[0] ?? vm[0] ?? params[0] ?? all[0];
  const ys = (vm.length ? vm : metrics).filter((d) => d !== x);
  const y = ys.find((d) => /loss/i.test(d.key)) ?? ys[0] ?? all.find((d) => d !== x);
  return [x ? dimId(x) : '', y ? dimId(y) : ''];
}

/** A colour ramp from blue (low) to red (high), for the last axis. */
function ramp(t: number): string {
  const c = (a: number, b: number) => Math.round(a + (b - a) * t);
  return `rgb(${c(49, 214)}, ${c(130, 64)}, ${c(189, 48)})`;
}

export interface RunPlotsOpts {
  runs: Run[];
  /** a run's colour when runs are grouped (else the last axis colours lines) */
  colorOf?: (r: Run) => string | null;
}

export class RunPlots {
  readonly el: HTMLElement;
  private runs: Run[];
  private all: Dim[];
  private axes: Dim[];
  private pc: HTMLCanvasElement;
  private sc: HTMLCanvasElement;
  private tip: HTMLElement;
  private axisChips: HTMLElement;
  private xSel: HTMLSelectElement;
  private ySel: HTMLSelectElement;
  private pcLines: { run: Run; pts: ([number, number] | null)[] }[] = [];
  private scPoints: { run: Run; x: number; y: number }[] = [];
  private hover: Run | null = null;
  private addSel!: HTMLSelectElement;

  constructor(
    private opts: RunPlotsOpts,
    scope: Scope,
  ) {
    this.runs = opts.runs;
    this.all = dimsOf(this.runs);
    this.axes = defaultAxes(this.runs, this.all);
    this.pc = h('canvas', { class: 'plot-canvas', 'aria-label': 'Parallel coordinates' });
    this.sc = h('canvas', { class: 'plot-canvas', 'aria-label': 'Scatter plot' });
    this.tip = h('div', { class: 'plot-tip', role: 'status', hidden: true });
    this.axisChips = h('div', { class: 'axis-chips' });
    const addSel = (this.addSel = h('select', { 'aria-label': 'Add an axis' }));
    addSel.addEventListener('change', () => {
      const d = dimOf(addSel.value);
      addSel.value = '';
      if (d && !this.axes.some((a) => dimId(a) === dimId(d))) {
        this.axes.push(d);
        this.refresh();
      }
    });
    this.xSel = h('select', { 'aria-label': 'Scatter x axis' });
    this.ySel = h('select', { 'aria-label': 'Scatter y axis' });
    this.xSel.addEventListener('change', () => this.drawScatter());
    this.ySel.addEventListener('change', () => this.drawScatter());
    this.el = h(
      'div',
      { class: 'run-plots' },
      h('section', { class: 'plot-card', 'data-plot': 'parallel' }, h('div', { class: 'plot-head' }, h('h3', null, 'Parallel coordinates'), this.axisChips, addSel), this.pc),
      h('section', { class: 'plot-card', 'data-plot': 'scatter' }, h('div', { class: 'plot-head' }, h('h3', null, 'Scatter'), h('label', null, 'x ', this.xSel), h('label', null, 'y ', this.ySel)), this.sc),
      this.tip,
    );
    for (const c of [this.pc, this.sc]) {
      c.addEventListener('pointermove', (e) => this.onMove(c, e));
      c.addEventListener('pointerleave', () => this.setHover(null));
      c.addEventListener('click', () => this.hover && navigate('/runs/' + encodeURIComponent(this.hover.info.run_id)));
    }
    const ro = new ResizeObserver(() => this.draw());
    ro.observe(this.el);
    scope.add(() => ro.disconnect());
    this.refresh();
  }

  private fillSelects(): void {
    const addSel = this.addSel;
    const opt = (d: Dim) => h('option', { value: dimId(d) }, dimId(d));
    addSel.replaceChildren(h('option', { value: '' }, '+ axis…'), ...this.all.filter((d) => !this.axes.some((a) => dimId(a) === dimId(d))).map(opt));
    const x = this.xSel.value;
    const y = this.ySel.value;
    this.xSel.replaceChildren(...this.all.map(opt));
    this.ySel.replaceChildren(...this.all.map(opt));
    const [dx, dy] = scatterDefaults(this.runs, this.all);
    const ids = new Set(this.all.map(dimId));
    this.xSel.value = x && ids.has(x) ? x : dx;
    this.ySel.value = y && ids.has(y) ? y : dy;
  }

  /** setRuns changes the runs plotted (the axes chosen stay when they still exist). */
  setRuns(runs: Run[], colorOf?: (r: Run) => string | null): void {
    this.runs = runs;
    this.opts.colorOf = colorOf;
    this.all = dimsOf(runs);
    const ids = new Set(this.all.map(dimId));
    this.axes = this.axes.filter((a) => ids.has(dimId(a)));
    if (this.axes.length === 0) this.axes = defaultAxes(runs, this.all);
    this.refresh();
  }

  private refresh(): void {
    this.fillSelects();
    this.axisChips.replaceChildren(
      ...this.axes.map((d, i) =>
        h(
          'span',
          { class: 'chip', 'data-axis': dimId(d) },
          dimId(d),
          h('button', { class: 'icon small', title: 'Remove this axis', 'aria-label': 'Remove ' + dimId(d), onclick: () => (this.axes.splice(i, 1), this.refresh()) }, '×'),
        ),
      ),
    );
    this.draw();
  }

  private draw(): void {
    this.drawParallel();
    this.drawScatter();
  }

  private setup(c: HTMLCanvasElement, height: number): CanvasRenderingContext2D | null {
    const w = Math.max(200, Math.floor(c.parentElement?.clientWidth ?? 600) - 2);
    const dpr = window.devicePixelRatio || 1;
    c.width = Math.round(w * dpr);
    c.height = Math.round(height * dpr);
    c.style.width = w + 'px';
    c.style.height = height + 'px';
    const ctx = c.getContext('2d');
    if (!ctx) return null;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, height);
    return ctx;
  }

  private colours(): { fg: string; muted: string; line: string } {
    const css = getComputedStyle(document.documentElement);
    return { fg: css.getPropertyValue('--fg').trim() || '#222', muted: css.getPropertyValue('--muted').trim() || '#777', line: css.getPropertyValue('--line').trim() || '#ddd' };
  }

  private drawParallel(): void {
    const H = 300;
    const ctx = this.setup(this.pc, H);
    this.pcLines = [];
    if (!ctx) return;
    const W = parseFloat(this.pc.style.width);
    const { fg, muted, line } = this.colours();
    ctx.font = '12px system-ui, sans-serif';
    if (this.axes.length < 2 || this.runs.length === 0) {
      ctx.fillStyle = muted;
      ctx.fillText(this.runs.length === 0 ? 'No runs.' : 'Choose at least two axes.', 12, 24);
      this.pc.dataset.lines = '0';
      return;
    }
    const top = 34;
    const bottom = H - 18;
    const left = 60;
    const right = W - 60;
    const scales = this.axes.map((d) => scaleOf(this.runs, d));
    const xAt = (i: number) => left + (i * (right - left)) / (this.axes.length - 1);
    const yAt = (p: number) => bottom - p * (bottom - top);
    const last = scales[scales.length - 1];
    for (const r of this.runs) {
      const pts = scales.map((s, i) => {
        const p = s.pos(r);
        return p == null ? null : ([xAt(i), yAt(p)] as [number, number]);
      });
      this.pcLines.push({ run: r, pts });
    }
    const draw = (l: { run: Run; pts: ([number, number] | null)[] }, width: number, alpha: number) => {
      const lp = last.pos(l.run);
      ctx.strokeStyle = this.opts.colorOf?.(l.run) ?? (lp == null ? muted : ramp(lp));
      ctx.globalAlpha = alpha;
      ctx.lineWidth = width;
      ctx.beginPath();
      let open = false;
      for (const p of l.pts) {
        if (!p) {
          open = false;
          continue;
        }
        if (open) ctx.lineTo(p[0], p[1]);
        else ctx.moveTo(p[0], p[1]);
        open = true;
      }
      ctx.stroke();
    };
    const alpha = this.runs.length > 200 ? 0.35 : 0.75;
    for (const l of this.pcLines) if (l.run !== this.hover) draw(l, 1.2, this.hover ? alpha * 0.5 : alpha);
    const hl = this.pcLines.find((l) => l.run === this.hover);
    if (hl) draw(hl, 3, 1);
    ctx.globalAlpha = 1;
    scales.forEach((s, i) => {
      const x = xAt(i);
      ctx.strokeStyle = line;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(x, top);
      ctx.lineTo(x, bottom);
      ctx.stroke();
      ctx.fillStyle = fg;
      ctx.textAlign = i === 0 ? 'left' : i === scales.length - 1 ? 'right' : 'center';
      const name = s.label.length > 28 ? s.label.slice(0, 27) + '…' : s.label;
      ctx.fillText(name, i === 0 ? x - 50 : i === scales.length - 1 ? x + 50 : x, 16);
      ctx.fillStyle = muted;
      ctx.textAlign = 'right';
      for (const t of s.ticks) ctx.fillText(t.label, x - 4, yAt(t.at) + 4);
    });
    ctx.textAlign = 'left';
    this.pc.dataset.lines = String(this.pcLines.length);
    this.pc.dataset.axes = this.axes.map(dimId).join('|');
  }

  private drawScatter(): void {
    const H = 300;
    const ctx = this.setup(this.sc, H);
    this.scPoints = [];
    if (!ctx) return;
    const W = parseFloat(this.sc.style.width);
    const { fg, muted, line } = this.colours();
    ctx.font = '12px system-ui, sans-serif';
    const xd = dimOf(this.xSel.value);
    const yd = dimOf(this.ySel.value);
    if (!xd || !yd || this.runs.length === 0) {
      ctx.fillStyle = muted;
      ctx.fillText('No params or metrics to plot.', 12, 24);
      this.sc.dataset.points = '0';
      return;
    }
    const xs = scaleOf(this.runs, xd);
    const ys = scaleOf(this.runs, yd);
    // Room for the labels: the y axis's name (rotated, 18 px) and its
    // widest tick label at the left; x tick labels are kept inside the
    // canvas. The boxes drawn are recorded (data-labels) for the tests.
    const tickW = Math.max(0, ...ys.ticks.map((t) => ctx.measureText(t.label).width));
    const left = Math.min(Math.round(22 + tickW + 6), Math.round(W * 0.4));
    const right = W - 16;
    const top = 12;
    const bottom = H - 36;
    const px = (p: number) => left + p * (right - left);
    const py = (p: number) => bottom - p * (bottom - top);
    const boxes: number[][] = [];
    const text = (s: string, x: number, y: number, align: 'left' | 'center' | 'right') => {
      const w = ctx.measureText(s).width;
      let x0 = align === 'left' ? x : align === 'center' ? x - w / 2 : x - w;
      x0 = Math.max(0, Math.min(x0, W - w));
      ctx.textAlign = 'left';
      ctx.fillText(s, x0, y);
      boxes.push([x0, y - 10, x0 + w, y + 3]);
    };
    ctx.strokeStyle = line;
    ctx.strokeRect(left, top, right - left, bottom - top);
    ctx.fillStyle = muted;
    for (const t of xs.ticks) text(t.label, px(t.at), bottom + 14, 'center');
    for (const t of ys.ticks) text(fitText(ctx, t.label, left - 26), left - 4, py(t.at) + 4, 'right');
    ctx.fillStyle = fg;
    text(fitText(ctx, xs.label, W - 8), (left + right) / 2, H - 4, 'center');
    ctx.textAlign = 'left';
    for (const r of this.runs) {
      const a = xs.pos(r);
      const b = ys.pos(r);
      if (a == null || b == null) continue;
      this.scPoints.push({ run: r, x: px(a), y: py(b) });
    }
    for (const p of this.scPoints) {
      ctx.fillStyle = this.opts.colorOf?.(p.run) ?? '#2563eb';
      ctx.globalAlpha = this.hover && this.hover !== p.run ? 0.35 : 0.85;
      ctx.beginPath();
      ctx.arc(p.x, p.y, p.run === this.hover ? 6 : 4, 0, Math.PI * 2);
      ctx.fill();
    }
    ctx.globalAlpha = 1;
    ctx.save();
    ctx.translate(14, (top + bottom) / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = 'center';
    ctx.fillStyle = fg;
    const yl = fitText(ctx, ys.label, bottom - top);
    ctx.fillText(yl, 0, 0);
    ctx.restore();
    const yw = ctx.measureText(yl).width;
    boxes.push([4, (top + bottom) / 2 - yw / 2, 17, (top + bottom) / 2 + yw / 2]);
    this.sc.dataset.points = String(this.scPoints.length);
    this.sc.dataset.labels = JSON.stringify(boxes.map((b) => b.map((v) => Math.round(v * 10) / 10)));
  }

  private onMove(c: HTMLCanvasElement, e: PointerEvent): void {
    const rect = c.getBoundingClientRect();
    const x = e.clientX - rect.left;
    const y = e.clientY - rect.top;
    let best: Run | null = null;
    let bestD = 12;
    if (c === this.sc) {
      for (const p of this.scPoints) {
        const d = Math.hypot(p.x - x, p.y - y);
        if (d < bestD) (bestD = d), (best = p.run);
      }
    } else {
      for (const l of this.pcLines) {
        for (let i = 1; i < l.pts.length; i++) {
          const a = l.pts[i - 1];
          const b = l.pts[i];
          if (!a || !b || x < Math.min(a[0], b[0]) - 2 || x > Math.max(a[0], b[0]) + 2) continue;
          const d = segDist(x, y, a, b);
          if (d < bestD) (bestD = d), (best = l.run);
        }
      }
    }
    this.setHover(best, e.clientX - this.el.getBoundingClientRect().left, e.clientY - this.el.getBoundingClientRect().top);
  }

  private setHover(r: Run | null, x = 0, y = 0): void {
    const changed = r !== this.hover;
    this.hover = r;
    this.pc.style.cursor = this.sc.style.cursor = r ? 'pointer' : 'default';
    if (!r) {
      this.tip.hidden = true;
      if (changed) this.draw();
      return;
    }
    const vals = (this.axes.length ? this.axes : this.all.slice(0, 6)).map((d) => {
      const v = rawValue(r, d);
      return `${dimId(d)} = ${typeof v === 'number' ? fmtNumber(v) : v ?? '—'}`;
    });
    this.tip.replaceChildren(h('strong', null, r.info.run_name || r.info.run_id), ...vals.map((v) => h('div', null, v)));
    this.tip.hidden = false;
    this.tip.style.left = Math.round(x + 14) + 'px';
    this.tip.style.top = Math.round(y + 10) + 'px';
    if (changed) this.draw();
  }
}

function segDist(x: number, y: number, a: [number, number], b: [number, number]): number {
  const dx = b[0] - a[0];
  const dy = b[1] - a[1];
  const len = dx * dx + dy * dy;
  const t = len > 0 ? Math.max(0, Math.min(1, ((x - a[0]) * dx + (y - a[1]) * dy) / len)) : 0;
  return Math.hypot(x - (a[0] + t * dx), y - (a[1] + t * dy));
}
