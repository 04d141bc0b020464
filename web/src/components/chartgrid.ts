// A grid of metric charts, one per key, with shared settings (x axis,
// smoothing, log scale) and a key filter. Charts are created only when
// they scroll near the viewport, so a run with thousands of metric keys
// opens as fast as one with three.

import { h, Scope } from '../dom';
import { ChartRun, ChartSettings, MetricChart, XMode } from './chart';

const SETTINGS_KEY = 'sextant.chart.settings';

function loadSettings(): ChartSettings {
  const d: ChartSettings = { xMode: 'step', smoothing: 0, log: false };
  try {
    const v = JSON.parse(localStorage.getItem(SETTINGS_KEY) ?? '{}');
    if (['step', 'relative', 'wall'].includes(v.xMode)) d.xMode = v.xMode;
    if (typeof v.smoothing === 'number' && v.smoothing >= 0 && v.smoothing < 1) d.smoothing = v.smoothing;
    if (typeof v.log === 'boolean') d.log = v.log;
  } catch {
    /* defaults */
  }
  return d;
}

export interface ChartGridOpts {
  runs: ChartRun[];
  keys: string[];
  live?: () => boolean;
  empty?: string;
}

export class ChartGrid {
  readonly el: HTMLElement;
  private charts = new Map<string, MetricChart>();
  private settings = loadSettings();
  private grid: HTMLElement;
  private io: IntersectionObserver;

  constructor(
    private opts: ChartGridOpts,
    private scope: Scope,
  ) {
    const s = this.settings;
    const xSel = h(
      'select',
      { 'aria-label': 'X axis', name: 'x-axis' },
      h('option', { value: 'step', selected: s.xMode === 'step' }, 'Step'),
      h('option', { value: 'relative', selected: s.xMode === 'relative' }, 'Relative time'),
      h('option', { value: 'wall', selected: s.xMode === 'wall' }, 'Wall time'),
    );
    const smooth = h('input', { type: 'range', min: 0, max: 0.99, step: 0.01, value: String(s.smoothing), 'aria-label': 'Smoothing', name: 'smoothing' });
    const smoothVal = h('span', { class: 'muted num' }, s.smoothing.toFixed(2));
    const log = h('input', { type: 'checkbox', checked: s.log, name: 'log-scale' });
    const find = h('input', { type: 'search', placeholder: 'Filter metrics…', 'aria-label': 'Filter metrics' });
    xSel.addEventListener('change', () => this.set({ xMode: xSel.value as XMode }));
    smooth.addEventListener('input', () => {
      smoothVal.textContent = Number(smooth.value).toFixed(2);
      this.set({ smoothing: Number(smooth.value) });
    });
    log.addEventListener('change', () => this.set({ log: log.checked }));
    find.addEventListener('input', () => this.filter(find.value));
    this.grid = h('div', { class: 'chart-grid' });
    this.io = new IntersectionObserver((entries) => this.onVisible(entries), { rootMargin: '400px 0px' });
    scope.add(() => this.io.disconnect());
    this.el = h(
      'div',
      { class: 'charts' },
      h(
        'div',
        { class: 'toolbar chart-toolbar' },
        find,
        h('label', null, 'X axis ', xSel),
        h('label', null, 'Smoothing ', smooth, smoothVal),
        h('label', null, log, ' Log scale'),
        h('span', { class: 'muted' }, 'Drag to zoom, double-click to zoom out'),
      ),
      this.grid,
    );
    this.build();
  }

  private build(): void {
    this.grid.replaceChildren();
    this.charts.clear();
    if (this.opts.keys.length === 0) {
      this.grid.append(h('p', { class: 'empty' }, this.opts.empty ?? 'No metrics logged.'));
      return;
    }
    for (const key of this.opts.keys) {
      const slot = h('div', { class: 'chart-slot', 'data-metric': key }, h('div', { class: 'chart-title' }, key));
      this.grid.append(slot);
      this.io.observe(slot);
    }
  }

  private onVisible(entries: IntersectionObserverEntry[]): void {
    for (const e of entries) {
      if (!e.isIntersecting) continue;
      const slot = e.target as HTMLElement;
      const key = slot.dataset.metric!;
      this.io.unobserve(slot);
      if (this.charts.has(key)) continue;
      const c = new MetricChart({ ...this.settings, metricKey: key, runs: this.opts.runs, live: this.opts.live }, this.scope);
      this.charts.set(key, c);
      slot.replaceChildren(c.el);
    }
  }

  private set(s: Partial<ChartSettings>): void {
    this.settings = { ...this.settings, ...s };
    try {
      localStorage.setItem(SETTINGS_KEY, JSON.stringify(this.settings));
    } catch {
      /* ignore */
    }
    for (const c of this.charts.values()) c.update(s);
  }

  private filter(term: string): void {
    const t = term.toLowerCase();
    for (const slot of this.grid.querySelectorAll<HTMLElement>('.chart-slot')) slot.hidden = !!t && !slot.dataset.metric!.toLowerCase().includes(t);
  }

  /** setRuns changes the runs every chart draws (grouping, colours). */
  setRuns(runs: ChartRun[]): void {
    this.opts.runs = runs;
    for (const c of this.charts.values()) c.update({ runs });
  }
}
