// A board of metric charts: one per key (or per GPU field), in sections by
// key prefix (train/, val/, system/) that collapse, with a search box and
// shared settings (x axis, smoothing, log scale). It is virtualised: only
// the rows of charts on screen (and one beyond) exist; a row that scrolls
// away is destroyed, its requests dropped if they had not started, and
// its data kept in the series cache, so 3,000 keys scroll like 30 and a
// chart scrolled back to draws without asking the server again. A chart
// scrolled past at once asks nothing (deferMs).

import { debounce, h, Scope } from '../dom';
import { naturalCompare, sections } from '../lib/keys';
import { ChartOpts, ChartSettings, MetricChart, XMode } from './chart';

const SETTINGS_KEY = 'sextant.chart.settings';
const MIN_W = 440;
const GAP = 12;
const CARD_H = 300;
const HEAD_H = 36;
const OVERSCAN = 320;

/** loadSettings reads a board's chart settings kept under key; xMode is the x axis until one is picked. */
export function loadSettings(key = SETTINGS_KEY, xMode: XMode = 'step'): ChartSettings {
  const d: ChartSettings = { xMode, smoothing: 0, log: false };
  try {
    const v = JSON.parse(localStorage.getItem(key) ?? '{}');
    if (['step', 'relative', 'wall'].includes(v.xMode)) d.xMode = v.xMode;
    if (typeof v.smoothing === 'number' && v.smoothing >= 0 && v.smoothing < 1) d.smoothing = v.smoothing;
    if (typeof v.log === 'boolean') d.log = v.log;
  } catch {
    /* defaults */
  }
  return d;
}

/** One chart of a board: what it draws is made when it comes on screen. */
export interface BoardChart {
  /** unique on the board; the chart's data-metric */
  id: string;
  title: string;
  section: string;
  /** what the chart draws: lines, or groups and their key */
  make: () => Pick<ChartOpts, 'lines' | 'groups' | 'groupKey'>;
}

export interface BoardOpts {
  charts: BoardChart[];
  live?: () => boolean;
  empty?: string;
  /** localStorage key for the collapsed sections */
  storeKey?: string;
  /** more controls for the toolbar (group by, which runs) */
  controls?: Node[];
  sectionLabel?: (name: string) => string;
  /** about how many points a run has of a key (ChartOpts.estimate) */
  estimate?: (runId: string, key: string) => number | undefined;
  /**
   * fit sizes the board to its rows (fitHeight): for a page with more
   * below it (compare), so that the page and the board do not both scroll
   * with a chart cut between them.
   */
  fit?: boolean;
  /**
   * settingsKey keeps this board's chart settings apart from the others'
   * (localStorage), and xMode is its x axis until one is picked: the
   * system metrics are samples in time, not steps.
   */
  settingsKey?: string;
  xMode?: XMode;
}

type Row = { kind: 'head'; top: number; section: string; count: number; total: number } | { kind: 'charts'; top: number; charts: BoardChart[] };

interface Rendered {
  el: HTMLElement;
  scope: Scope;
  charts: Map<string, MetricChart>;
}

/**
 * fitHeight is the height of a fit board: all its rows (content px tall,
 * the board then does not scroll: the page does) when they take at most
 * 2.5 windows, else the whole rows that fit in 85% of the window (a chart
 * is never cut at the board's bottom), at least one row of charts.
 */
export function fitHeight(rows: readonly { kind: string; top: number }[], content: number, windowH: number): number {
  if (content <= windowH * 2.5) return Math.max(content, 1);
  const room = Math.max(windowH * 0.85, CARD_H + GAP + HEAD_H);
  let h = 0;
  for (const r of rows) {
    const bottom = r.top + (r.kind === 'head' ? HEAD_H : CARD_H + GAP);
    if (bottom > room) break;
    h = bottom;
  }
  return Math.max(h, Math.min(content, CARD_H + GAP));
}

export class ChartBoard {
  readonly el: HTMLElement;
  private settings: ChartSettings;
  private scroller: HTMLElement;
  private spacer: HTMLElement;
  private count: HTMLElement;
  private term = '';
  private collapsed: Set<string>;
  private rows: Row[] = [];
  private rendered = new Map<number, Rendered>();
  private cols = 0;
  private raf = 0;
  private scrolling = false;
  private top = 0;
  private vh = 800;
  private settle: () => void;

  constructor(
    private opts: BoardOpts,
    private scope: Scope,
  ) {
    this.collapsed = new Set(this.loadCollapsed());
    this.settings = loadSettings(opts.settingsKey, opts.xMode);
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
    const find = h('input', { type: 'search', placeholder: 'Search metrics…', 'aria-label': 'Filter metrics', class: 'board-search' });
    xSel.addEventListener('change', () => this.set({ xMode: xSel.value as XMode }));
    smooth.addEventListener('input', () => {
      smoothVal.textContent = Number(smooth.value).toFixed(2);
      this.set({ smoothing: Number(smooth.value) });
    });
    log.addEventListener('change', () => this.set({ log: log.checked }));
    const applyFind = debounce(() => {
      this.term = find.value.trim().toLowerCase();
      this.layout(true);
    }, 120);
    find.addEventListener('input', applyFind);
    this.count = h('span', { class: 'muted', 'data-testid': 'chart-count' });
    this.spacer = h('div', { class: 'board-spacer' });
    this.scroller = h('div', { class: 'board-scroll' + (opts.fit ? ' fit' : ''), tabindex: 0 }, this.spacer);
    this.el = h(
      'div',
      { class: 'charts board' },
      h(
        'div',
        { class: 'toolbar chart-toolbar' },
        find,
        ...(opts.controls ?? []),
        h('label', null, 'X axis ', xSel),
        h('label', null, 'Smoothing ', smooth, smoothVal),
        h('label', null, log, ' Log scale'),
        h('button', { class: 'link', onclick: () => this.collapseAll(true) }, 'Collapse all'),
        h('button', { class: 'link', onclick: () => this.collapseAll(false) }, 'Expand all'),
        this.count,
        h('span', { class: 'muted' }, 'Drag to zoom, double-click to zoom out'),
      ),
      this.scroller,
    );
    this.settle = debounce(() => (this.scrolling = false), 150);
    this.scroller.addEventListener(
      'scroll',
      () => {
        this.top = this.scroller.scrollTop;
        this.scrolling = true;
        this.settle();
        this.schedule();
      },
      { passive: true },
    );
    const ro = new ResizeObserver(() => {
      const cols = this.colsFor(this.scroller.clientWidth);
      if (cols !== this.cols) this.layout(true);
      else this.schedule();
    });
    ro.observe(this.scroller);
    scope.add(() => {
      ro.disconnect();
      if (this.raf) cancelAnimationFrame(this.raf);
      this.clearRows();
    });
    this.layout(true);
  }

  private loadCollapsed(): string[] {
    if (!this.opts.storeKey) return [];
    try {
      const v = JSON.parse(localStorage.getItem(this.opts.storeKey) ?? '[]');
      return Array.isArray(v) ? v.filter((x) => typeof x === 'string') : [];
    } catch {
      return [];
    }
  }

  private saveCollapsed(): void {
    if (!this.opts.storeKey) return;
    try {
      localStorage.setItem(this.opts.storeKey, JSON.stringify([...this.collapsed]));
    } catch {
      /* private mode */
    }
  }

  private colsFor(width: number): number {
    return Math.max(1, Math.floor((width + GAP) / (MIN_W + GAP)));
  }

  /** layout recomputes the rows (after a search, a collapse, a resize or new charts). */
  private layout(rebuild: boolean): void {
    this.cols = this.colsFor(this.scroller.clientWidth || 1200);
    const bySection = new Map<string, BoardChart[]>();
    const totals = new Map<string, number>();
    let shown = 0;
    for (const c of this.opts.charts) {
      totals.set(c.section, (totals.get(c.section) ?? 0) + 1);
      if (this.term && !c.title.toLowerCase().includes(this.term)) continue;
      let list = bySection.get(c.section);
      if (!list) bySection.set(c.section, (list = []));
      list.push(c);
      shown++;
    }
    const rows: Row[] = [];
    let top = 0;
    const multi = totals.size > 1 || (totals.size === 1 && !totals.has(''));
    for (const [section, charts] of bySection) {
      if (multi) {
        rows.push({ kind: 'head', top, section, count: charts.length, total: totals.get(section)! });
        top += HEAD_H;
      }
      if (this.collapsed.has(section) && multi) continue;
      for (let i = 0; i < charts.length; i += this.cols) {
        rows.push({ kind: 'charts', top, charts: charts.slice(i, i + this.cols) });
        top += CARD_H + GAP;
      }
    }
    this.rows = rows;
    this.spacer.style.height = Math.max(top, 1) + 'px';
    if (this.opts.fit) this.scroller.style.height = fitHeight(rows, top, window.innerHeight) + 'px';
    const total = this.opts.charts.length;
    this.count.textContent = this.term ? `${shown.toLocaleString()} of ${total.toLocaleString()} charts` : `${total.toLocaleString()} chart${total === 1 ? '' : 's'}`;
    this.el.dataset.charts = String(total);
    this.el.dataset.shown = String(shown);
    this.el.dataset.cols = String(this.cols);
    if (rebuild) this.clearRows();
    if (total === 0) {
      this.spacer.replaceChildren(h('p', { class: 'empty' }, this.opts.empty ?? 'No metrics logged.'));
      return;
    }
    if (shown === 0) {
      this.spacer.replaceChildren(h('p', { class: 'empty' }, 'No metric matches the search.'));
      return;
    }
    this.spacer.querySelector(':scope > p.empty')?.remove();
    this.update();
  }

  private clearRows(): void {
    for (const r of this.rendered.values()) {
      r.scope.dispose();
      r.el.remove();
    }
    this.rendered.clear();
  }

  private schedule(): void {
    if (!this.raf) this.raf = requestAnimationFrame(() => ((this.raf = 0), this.update()));
  }

  /** first is the index of the first row whose bottom is below y. */
  private first(y: number): number {
    let lo = 0;
    let hi = this.rows.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const r = this.rows[mid];
      const bottom = r.top + (r.kind === 'head' ? HEAD_H : CARD_H + GAP);
      if (bottom <= y) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** update renders the rows in view and removes the others. */
  private update(): void {
    if (this.scope.disposed) return;
    const st = this.scroller.scrollTop;
    const vh = this.scroller.clientHeight || 800;
    this.top = st;
    this.vh = vh;
    const from = this.first(st - OVERSCAN);
    let to = from;
    while (to < this.rows.length && this.rows[to].top < st + vh + OVERSCAN) to++;
    for (const [i, r] of this.rendered) {
      if (i < from || i >= to) {
        r.scope.dispose();
        r.el.remove();
        this.rendered.delete(i);
      }
    }
    for (let i = from; i < to; i++) if (!this.rendered.has(i)) this.renderRow(i, st, vh);
    this.el.dataset.rendered = String([...this.rendered.values()].reduce((a, r) => a + r.charts.size, 0));
  }

  private renderRow(i: number, st: number, vh: number): void {
    const row = this.rows[i];
    const scope = new Scope();
    let el: HTMLElement;
    const charts = new Map<string, MetricChart>();
    if (row.kind === 'head') {
      const open = !this.collapsed.has(row.section);
      const label = this.opts.sectionLabel?.(row.section) ?? (row.section || 'Metrics');
      el = h(
        'button',
        { class: 'board-head', 'aria-expanded': String(open), 'data-section': row.section, onclick: () => this.toggle(row.section) },
        h('span', { class: 'caret' }, open ? '▾' : '▸'),
        h('span', { class: 'board-section' }, label),
        h('span', { class: 'muted' }, row.count === row.total ? String(row.total) : `${row.count} of ${row.total}`),
      );
      el.style.height = HEAD_H + 'px';
    } else {
      el = h('div', { class: 'board-row' });
      el.style.gridTemplateColumns = `repeat(${this.cols}, minmax(0, 1fr))`;
      el.style.height = CARD_H + 'px';
      const rowTop = row.top;
      const offscreen = rowTop >= st + vh || rowTop + CARD_H <= st;
      for (const c of row.charts) {
        const chart = new MetricChart(
          {
            ...this.settings,
            ...c.make(),
            id: c.id,
            title: c.title,
            live: this.opts.live,
            estimate: this.opts.estimate,
            height: 210,
            // Scrolled past at once, or only near the screen: ask later, so
            // that the charts on screen have the server first.
            deferMs: this.scrolling ? 200 : offscreen ? 250 : 0,
            // The scroll position as of the last scroll event: reading
            // scrollTop here would force a layout for every queued task.
            priority: () => Math.abs(rowTop - this.top),
            background: () => rowTop >= this.top + this.vh || rowTop + CARD_H <= this.top,
          },
          scope,
        );
        charts.set(c.id, chart);
        el.append(h('div', { class: 'chart-slot', 'data-metric': c.id }, chart.el));
      }
    }
    el.classList.add('board-item');
    el.style.transform = `translateY(${row.top}px)`;
    this.spacer.append(el);
    this.rendered.set(i, { el, scope, charts });
  }

  private toggle(section: string): void {
    if (this.collapsed.has(section)) this.collapsed.delete(section);
    else this.collapsed.add(section);
    this.saveCollapsed();
    this.layout(true);
  }

  private collapseAll(on: boolean): void {
    if (on) for (const c of this.opts.charts) this.collapsed.add(c.section);
    else this.collapsed.clear();
    this.saveCollapsed();
    this.layout(true);
  }

  private set(s: Partial<ChartSettings>): void {
    this.settings = { ...this.settings, ...s };
    try {
      localStorage.setItem(this.opts.settingsKey ?? SETTINGS_KEY, JSON.stringify(this.settings));
    } catch {
      /* ignore */
    }
    for (const r of this.rendered.values()) for (const c of r.charts.values()) c.update(s);
  }

  /**
   * setCharts changes what the board draws. When the charts are the same
   * (ids and sections) and only their lines changed (other runs, a
   * grouping), the charts on screen are updated in place.
   */
  setCharts(charts: BoardChart[], estimate?: BoardOpts['estimate']): void {
    if (estimate) this.opts.estimate = estimate;
    const same = charts.length === this.opts.charts.length && charts.every((c, i) => c.id === this.opts.charts[i].id && c.section === this.opts.charts[i].section);
    this.opts.charts = charts;
    if (!same) {
      this.layout(true);
      return;
    }
    const byId = new Map(charts.map((c) => [c.id, c]));
    for (const r of this.rendered.values()) for (const [id, ch] of r.charts) ch.update(byId.get(id)!.make());
  }

  /** scrollToChart brings a chart into view (tests, links). */
  scrollToChart(id: string): void {
    const row = this.rows.find((r) => r.kind === 'charts' && r.charts.some((c) => c.id === id));
    if (row) this.scroller.scrollTop = row.top;
  }
}

/** keyCharts makes one board chart per key: sections by prefix, keys in natural order within them. */
export function keyCharts(keys: readonly string[], make: (key: string) => ReturnType<BoardChart['make']>): BoardChart[] {
  const sorted = [...keys].sort(naturalCompare);
  return sections(sorted, (k) => k).flatMap((sec) => sec.items.map((key) => ({ id: key, title: key, section: sec.name, make: () => make(key) })));
}
