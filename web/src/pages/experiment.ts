// The experiment page: the runs table (columns for attributes, params,
// latest metrics and tags, chosen by the user), the filter box with the
// MLflow search grammar, sorting, selection for comparing, and live run
// status. Rows are virtualised: 10,000 runs scroll like 10.

import { ApiError, Experiment, getExperiment, Run, searchRuns } from '../api';
import { VList } from '../components/vlist';
import { config } from '../config';
import { debounce, errorBox, h, link, Scope } from '../dom';
import { errorOffset, markError, quoteKey, tokenizeFilter } from '../lib/filter';
import { fmtDuration, fmtNumber, fmtTime } from '../lib/format';
import { getGPUHours, gpuHoursText } from '../lib/gpuhours';
import { folderCrumbs } from '../lib/wspath';
import { perf } from '../perf';
import { navigate, setQuery } from '../router';
import { session } from '../session';
import { ExpView, experimentCharts, experimentPlots } from './expcharts';
import { permissionsDialog } from './permissions';

type Kind = 'attr' | 'metric' | 'param' | 'tag';
interface Column {
  kind: Kind;
  key: string;
}

const ATTRS: { key: string; label: string; order?: string; width: number }[] = [
  { key: 'run_name', label: 'Run name', order: 'attributes.run_name', width: 220 },
  { key: 'status', label: 'Status', order: 'attributes.status', width: 96 },
  { key: 'start_time', label: 'Started', order: 'attributes.start_time', width: 172 },
  { key: 'duration', label: 'Duration', width: 90 },
  { key: 'user_id', label: 'User', order: 'attributes.user_id', width: 150 },
  { key: 'source', label: 'Source', width: 160 },
  { key: 'run_id', label: 'Run ID', order: 'attributes.run_id', width: 270 },
];
const DEFAULT_ATTRS = ['run_name', 'status', 'start_time', 'duration', 'user_id'];

interface RowCache {
  metrics: Map<string, number>;
  params: Map<string, string>;
  tags: Map<string, string>;
}

const ROW_H = 30;

function colId(c: Column): string {
  return c.kind + ':' + c.key;
}

function colLabel(c: Column): string {
  if (c.kind === 'attr') return ATTRS.find((a) => a.key === c.key)?.label ?? c.key;
  return c.key;
}

function defaultWidth(c: Column): number {
  if (c.kind === 'attr') return ATTRS.find((a) => a.key === c.key)?.width ?? 120;
  // Wide enough for the key's name, within reason (the header tooltip has all of it).
  const label = Math.min(260, 34 + c.key.length * 7.5);
  return Math.max(c.kind === 'tag' ? 150 : 110, Math.round(label));
}

function orderKey(c: Column): string | null {
  if (c.kind === 'attr') return ATTRS.find((a) => a.key === c.key)?.order ?? null;
  const prefix = c.kind === 'metric' ? 'metrics' : c.kind === 'param' ? 'params' : 'tags';
  return prefix + '.' + quoteKey(c.key);
}

/** renderFilter draws the filter with coloured tokens and, for an error, its position marked. */
export function renderFilter(filter: string, message: string | null): HTMLElement {
  const off = message ? errorOffset(message, filter) : -1;
  let tokens = tokenizeFilter(filter);
  let errIdx = -1;
  if (off >= 0) ({ tokens, index: errIdx } = markError(tokens, off));
  const spans = tokens.map((t, i) => h('span', { class: 'tok-' + t.kind + (i === errIdx ? ' tok-error' : '') }, t.text));
  if (off >= 0 && errIdx >= tokens.length) spans.push(h('span', { class: 'tok-error tok-end' }, ' '));
  return h('code', { class: 'filter-render' }, spans);
}

export function experimentPage(p: Record<string, string>, q: URLSearchParams, scope: Scope): HTMLElement {
  const expId = p.id;
  const storeKey = 'sextant.cols.' + expId;
  const widthKey = 'sextant.colw.' + expId;
  const widths: Record<string, number> = loadWidths();
  const colWidth = (c: Column) => widths[colId(c)] ?? defaultWidth(c);
  let exp: Experiment | null = null;
  let runs: Run[] = [];
  const cache = new WeakMap<Run, RowCache>();
  const selected = new Set<string>();
  const keys = { metric: new Set<string>(), param: new Set<string>(), tag: new Set<string>() };
  let columns: Column[] = loadColumns();
  let userChoseColumns = columns.length > 0;
  let order: { col: Column; desc: boolean } | null = null;
  const orderParam = q.get('order');
  if (orderParam) {
    const [id, dir] = orderParam.split(' ');
    const [kind, ...rest] = id.split(':');
    order = { col: { kind: kind as Kind, key: rest.join(':') }, desc: dir === 'DESC' };
  }
  let filter = q.get('filter') ?? '';
  let loading: AbortController | null = null;
  let complete = false;
  const t0 = performance.now();
  let painted = false;

  const title = h('h1', null, 'Experiment ' + expId);
  const crumbs = h('nav', { class: 'crumbs', 'aria-label': 'Folder path', 'data-testid': 'experiment-crumbs' }, link('/', 'Workspace'));
  const meta = h('div', { class: 'muted' });
  const countEl = h('span', { class: 'muted', 'data-testid': 'run-count' });
  const filterInput = h('input', {
    type: 'text',
    class: 'filter',
    value: filter,
    spellcheck: 'false',
    placeholder: "Filter runs: metrics.loss < 0.5 AND params.lr = '0.001'",
    'aria-label': 'Filter runs',
  });
  const filterView = h('div', { class: 'filter-view' });
  const filterErr = h('div', { class: 'filter-error', role: 'alert' });
  const compareBtn = h('button', { class: 'primary', disabled: true, onclick: () => navigate('/compare?runs=' + [...selected].slice(0, 100).join(',')) }, 'Compare');
  const header = h('div', { class: 'rt-row rt-head' });
  const body = h('div', { class: 'runs-body' });
  const VIEWS = { table: 'Table', charts: 'Charts', plots: 'Plots' } as const;
  type View = keyof typeof VIEWS;
  let view: View = (Object.keys(VIEWS) as View[]).includes(q.get('view') as View) ? (q.get('view') as View) : 'table';
  const alt = h('div', { class: 'exp-view' });
  let viewScope = new Scope();
  let viewNow: ExpView | null = null;
  scope.add(() => viewScope.dispose());
  const viewBar = h('div', { class: 'segmented', role: 'tablist', 'aria-label': 'View' });
  const viewOpts = {
    expId,
    runs: () => runs,
    selected: () => selected,
    complete: () => complete,
    live: () => runs.some((r) => r.info.status === 'RUNNING'),
  };
  const refreshView = debounce(() => viewNow?.refresh(), 200);
  const chartFirst = () => {
    const n = Number(new URLSearchParams(location.search).get('first'));
    return [10, 20, 50, 100].includes(n) ? n : 10;
  };
  const showView = (v: View) => {
    view = v;
    setQuery({ view: v === 'table' ? null : v });
    for (const b of viewBar.querySelectorAll('button')) b.setAttribute('aria-selected', String(b.dataset.view === v));
    viewScope.dispose();
    viewScope = new Scope();
    viewNow = null;
    body.hidden = v !== 'table';
    alt.hidden = v === 'table';
    if (v === 'charts') viewNow = experimentCharts(viewOpts, new URLSearchParams(location.search), viewScope);
    else if (v === 'plots') viewNow = experimentPlots(viewOpts, viewScope);
    alt.replaceChildren(viewNow?.el ?? '');
  };
  for (const [v, label] of Object.entries(VIEWS)) viewBar.append(h('button', { role: 'tab', 'data-view': v, 'aria-selected': String(v === view), onclick: () => showView(v as View) }, label));

  function loadColumns(): Column[] {
    try {
      const v = JSON.parse(localStorage.getItem(storeKey) ?? '[]');
      return Array.isArray(v) ? v.filter((c) => c && typeof c.key === 'string' && ['attr', 'metric', 'param', 'tag'].includes(c.kind)) : [];
    } catch {
      return [];
    }
  }
  function loadWidths(): Record<string, number> {
    try {
      const v = JSON.parse(localStorage.getItem(widthKey) ?? '{}');
      const out: Record<string, number> = {};
      if (v && typeof v === 'object') for (const [k, w] of Object.entries(v)) if (typeof w === 'number' && w >= 40 && w <= 2000) out[k] = w;
      return out;
    } catch {
      return {};
    }
  }
  /** resizer lets the user drag a header cell's right edge; the width is kept per experiment. */
  function resizer(c: Column, cell: HTMLElement, index: number): HTMLElement {
    const grip = h('span', { class: 'col-resize', title: 'Drag to resize, double-click to fit', 'aria-hidden': 'true' });
    const setWidth = (w: number) => {
      widths[colId(c)] = w;
      cell.style.width = w + 'px';
      for (const row of body.querySelectorAll<HTMLElement>('.rt-row[data-run-id]')) {
        const el = row.children[index + 1] as HTMLElement | undefined;
        if (el) el.style.width = w + 'px';
      }
    };
    const save = () => {
      try {
        localStorage.setItem(widthKey, JSON.stringify(widths));
      } catch {
        /* private mode */
      }
    };
    grip.addEventListener('click', (e) => e.stopPropagation());
    grip.addEventListener('pointerdown', (e: PointerEvent) => {
      e.preventDefault();
      e.stopPropagation();
      const x0 = e.clientX;
      const w0 = cell.getBoundingClientRect().width;
      const move = (ev: PointerEvent) => setWidth(Math.max(40, Math.min(2000, Math.round(w0 + ev.clientX - x0))));
      const up = () => {
        document.removeEventListener('pointermove', move);
        document.removeEventListener('pointerup', up);
        save();
      };
      document.addEventListener('pointermove', move);
      document.addEventListener('pointerup', up);
    });
    grip.addEventListener('dblclick', (e) => {
      e.stopPropagation();
      // Fit: the widest text of the header and the rows in view.
      let w = 40;
      const measure = (el: Element | undefined) => {
        if (el) w = Math.max(w, (el as HTMLElement).scrollWidth + 4);
      };
      measure(cell);
      for (const row of body.querySelectorAll<HTMLElement>('.rt-row[data-run-id]')) measure(row.children[index + 1]);
      setWidth(Math.min(800, w));
      save();
    });
    return grip;
  }
  function saveColumns(): void {
    try {
      localStorage.setItem(storeKey, JSON.stringify(columns));
    } catch {
      /* ignore */
    }
  }

  function rowCache(r: Run): RowCache {
    let c = cache.get(r);
    if (!c) {
      c = {
        metrics: new Map(r.data.metrics.map((m) => [m.key, m.value])),
        params: new Map(r.data.params.map((x) => [x.key, x.value])),
        tags: new Map(r.data.tags.map((x) => [x.key, x.value])),
      };
      cache.set(r, c);
    }
    return c;
  }

  function cellValue(r: Run, c: Column): string | Node {
    const rc = rowCache(r);
    switch (c.kind) {
      case 'metric': {
        const v = rc.metrics.get(c.key);
        return v === undefined ? '' : fmtNumber(v);
      }
      case 'param':
        return rc.params.get(c.key) ?? '';
      case 'tag':
        return rc.tags.get(c.key) ?? '';
    }
    const i = r.info;
    switch (c.key) {
      case 'run_name':
        return link('/runs/' + encodeURIComponent(i.run_id), i.run_name || i.run_id);
      case 'status':
        return h('span', { class: 'status status-' + String(i.status).toLowerCase() }, String(i.status ?? ''));
      case 'start_time':
        return fmtTime(i.start_time);
      case 'duration':
        return i.start_time ? fmtDuration((i.end_time || (i.status === 'RUNNING' ? Date.now() : i.start_time)) - i.start_time) : '';
      case 'user_id':
        return i.user_id ?? '';
      case 'source':
        return rc.tags.get('mlflow.source.name') ?? '';
      case 'run_id':
        return i.run_id;
    }
    return '';
  }

  function renderRow(idx: number): HTMLElement {
    const r = runs[idx];
    const row = h('div', { class: 'rt-row', 'data-run-id': r?.info.run_id ?? '' });
    if (!r) return row;
    const box = h('input', { type: 'checkbox', checked: selected.has(r.info.run_id), 'aria-label': 'Select run' });
    box.addEventListener('change', () => {
      if (box.checked) selected.add(r.info.run_id);
      else selected.delete(r.info.run_id);
      updateSelection();
    });
    row.append(h('div', { class: 'rt-cell rt-check' }, box));
    for (const c of columns) {
      const v = cellValue(r, c);
      const cell = h('div', { class: 'rt-cell rt-' + c.kind }, v);
      cell.style.width = colWidth(c) + 'px';
      if (typeof v === 'string' && v.length > 12) cell.title = v;
      else if (v instanceof Node && (v.textContent ?? '').length > 12) cell.title = v.textContent!;
      row.append(cell);
    }
    if (idx % 2) row.classList.add('odd');
    return row;
  }

  const list = new VList({ rowHeight: ROW_H, count: 0, render: renderRow, header, className: 'runs-table', overscan: 10 });

  function renderHeader(): void {
    const all = h('input', { type: 'checkbox', 'aria-label': 'Select all runs', checked: selected.size > 0 && selected.size === runs.length });
    all.addEventListener('change', () => {
      selected.clear();
      if (all.checked) for (const r of runs.slice(0, 100)) selected.add(r.info.run_id);
      updateSelection();
      list.refresh();
    });
    const cells: HTMLElement[] = [h('div', { class: 'rt-cell rt-check' }, all)];
    for (const [index, c] of columns.entries()) {
      const ok = orderKey(c);
      const active = order && colId(order.col) === colId(c);
      const cell = h(
        'div',
        {
          class: 'rt-cell rt-' + c.kind + (ok ? ' sortable' : '') + (active ? ' sorted' : ''),
          title: (c.kind === 'attr' ? '' : c.kind + 's.') + c.key + (ok ? ' — click to sort' : ''),
          'data-col': colId(c),
          onclick: ok
            ? () => {
                order = active ? (order!.desc ? { col: c, desc: false } : null) : { col: c, desc: true };
                setQuery({ order: order ? colId(order.col) + ' ' + (order.desc ? 'DESC' : 'ASC') : null });
                renderHeader();
                void search();
              }
            : null,
        },
        c.kind !== 'attr' ? h('span', { class: 'kind' }, c.kind[0]) : null,
        colLabel(c),
        active ? h('span', { class: 'arrow' }, order!.desc ? ' ↓' : ' ↑') : null,
      );
      cell.style.width = colWidth(c) + 'px';
      cell.append(resizer(c, cell, index));
      cells.push(cell);
    }
    header.replaceChildren(...cells);
  }

  function updateSelection(): void {
    refreshView();
    compareBtn.disabled = selected.size < 1;
    compareBtn.textContent = selected.size ? `Compare ${Math.min(selected.size, 100)} run${selected.size > 1 ? 's' : ''}` : 'Compare';
  }

  function learnKeys(batch: Run[]): boolean {
    const before = keys.metric.size + keys.param.size + keys.tag.size;
    for (const r of batch) {
      for (const m of r.data.metrics) keys.metric.add(m.key);
      for (const x of r.data.params) keys.param.add(x.key);
      for (const x of r.data.tags) if (!x.key.startsWith('mlflow.')) keys.tag.add(x.key);
    }
    return keys.metric.size + keys.param.size + keys.tag.size !== before;
  }

  function defaultColumns(): void {
    if (userChoseColumns) return;
    const cols: Column[] = DEFAULT_ATTRS.map((key) => ({ kind: 'attr' as Kind, key }));
    [...keys.metric].filter((k) => !k.startsWith('system/') && !k.startsWith('sextant/progress/')).sort().slice(0, 6).forEach((key) => cols.push({ kind: 'metric', key }));
    [...keys.param].sort().slice(0, 4).forEach((key) => cols.push({ kind: 'param', key }));
    columns = cols;
  }

  function showCount(): void {
    countEl.textContent = `${runs.length.toLocaleString()}${complete ? '' : '+'} run${runs.length === 1 ? '' : 's'}`;
  }

  async function search(): Promise<void> {
    loading?.abort();
    const ac = new AbortController();
    loading = ac;
    complete = false;
    filterErr.replaceChildren();
    filterView.replaceChildren(filter ? renderFilter(filter, null) : '');
    const orderBy = order ? [orderKey(order.col)! + (order.desc ? ' DESC' : ' ASC')] : [];
    let token: string | undefined;
    let first = true;
    try {
      do {
        // The chart view of the first N runs draws once those N have come (a
        // run with 3,000 keys is 250 KB of latest metrics); the rest follow.
        const firstPage = view === 'charts' && !new URLSearchParams(location.search).get('group') ? Math.min(200, chartFirst()) : 200;
        const page = await searchRuns([expId], filter, orderBy, first ? firstPage : config.runsPageSize, token, ac.signal);
        if (ac.signal.aborted || scope.disposed) return;
        if (first) runs = [];
        runs.push(...page.runs);
        token = page.next_page_token;
        complete = !token;
        const newKeys = learnKeys(page.runs);
        if (first || newKeys) {
          if (newKeys) defaultColumns();
          renderHeader();
          list.setCount(runs.length, true);
        } else list.setCount(runs.length);
        showCount();
        if (first) viewNow?.refresh();
        else refreshView();
        if (first) {
          first = false;
          if (runs.length === 0) body.dataset.empty = 'true';
          else delete body.dataset.empty;
          if (!painted) {
            painted = true;
            requestAnimationFrame(() => {
              const ms = performance.now() - t0;
              perf('runs-table-paint', ms);
              body.dataset.paintMs = String(Math.round(ms));
            });
          }
        }
      } while (token);
      body.dataset.loaded = 'true';
      refreshView();
      perf('runs-table-complete', performance.now() - t0);
    } catch (e) {
      if ((e as Error).name === 'AbortError') return;
      if (e instanceof ApiError && e.status === 400) {
        filterView.replaceChildren(renderFilter(filter, e.message));
        filterErr.replaceChildren(h('span', null, e.message));
      } else filterErr.replaceChildren(errorBox(e));
      runs = [];
      complete = true;
      list.setCount(0, true);
      showCount();
    }
  }

  // Live status: refresh the runs shown as running.
  scope.interval(async () => {
    if (document.visibilityState !== 'visible' || !complete) return;
    const live = runs.filter((r) => r.info.status === 'RUNNING').slice(0, 500);
    if (live.length === 0) return;
    try {
      const ids = live.map((r) => `'${r.info.run_id}'`).join(',');
      const page = await searchRuns([expId], `attributes.run_id IN (${ids})`, [], 1000);
      const byId = new Map(page.runs.map((r) => [r.info.run_id, r]));
      runs.forEach((r, i) => {
        const n = byId.get(r.info.run_id);
        if (n) {
          runs[i] = n;
          list.rerender(i);
        }
      });
    } catch {
      /* next time */
    }
  }, config.runPollMs);

  function columnPicker(): void {
    const panel = h('div', { class: 'col-picker', role: 'dialog', 'aria-label': 'Columns' });
    const find = h('input', { type: 'search', placeholder: 'Find a column…', 'aria-label': 'Find a column' });
    const lists = h('div', { class: 'col-lists' });
    const chosen = new Set(columns.map(colId));
    const draw = () => {
      const term = find.value.toLowerCase();
      const groups: [string, Column[]][] = [
        ['Attributes', ATTRS.map((a) => ({ kind: 'attr' as Kind, key: a.key }))],
        ['Metrics', [...keys.metric].sort().map((key) => ({ kind: 'metric' as Kind, key }))],
        ['Params', [...keys.param].sort().map((key) => ({ kind: 'param' as Kind, key }))],
        ['Tags', [...keys.tag].sort().map((key) => ({ kind: 'tag' as Kind, key }))],
      ];
      lists.replaceChildren(
        ...groups.map(([name, cols]) => {
          const shown = cols.filter((c) => colLabel(c).toLowerCase().includes(term)).slice(0, 300);
          return h(
            'fieldset',
            null,
            h('legend', null, `${name} (${cols.length})`),
            shown.map((c) => {
              const box = h('input', { type: 'checkbox', checked: chosen.has(colId(c)) });
              box.addEventListener('change', () => {
                if (box.checked) {
                  chosen.add(colId(c));
                  columns.push(c);
                } else {
                  chosen.delete(colId(c));
                  columns = columns.filter((x) => colId(x) !== colId(c));
                }
                userChoseColumns = true;
                saveColumns();
                renderHeader();
                list.refresh();
              });
              return h('label', { class: 'col-option' }, box, colLabel(c));
            }),
          );
        }),
      );
    };
    find.addEventListener('input', draw);
    draw();
    const close = () => {
      panel.remove();
      document.removeEventListener('mousedown', outside);
    };
    const outside = (e: MouseEvent) => {
      if (!panel.contains(e.target as Node) && e.target !== colsBtn) close();
    };
    panel.append(h('div', { class: 'row' }, find, h('button', { onclick: () => ((columns = []), (userChoseColumns = false), saveColumns(), defaultColumns(), renderHeader(), list.refresh(), close()) }, 'Reset')), lists);
    colsBtn.after(panel);
    setTimeout(() => document.addEventListener('mousedown', outside));
    scope.add(close);
  }
  const colsBtn = h('button', { onclick: () => columnPicker() }, 'Columns');

  filterInput.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') {
      filter = filterInput.value.trim();
      setQuery({ filter: filter || null });
      void search();
    }
  });
  filterInput.addEventListener('input', () => filterView.replaceChildren(filterInput.value ? renderFilter(filterInput.value, null) : ''));

  void getExperiment(expId)
    .then((e) => {
      exp = e;
      title.textContent = e.name;
      crumbs.replaceChildren(...folderCrumbs(e.name).flatMap((c, i) => (i ? [h('span', { class: 'sep' }, '/'), link(c.href, c.label)] : [link(c.href, c.label)])));
      document.title = e.name + ' · Sextant';
      meta.replaceChildren(`ID ${e.experiment_id}`, e.artifact_location ? ` · artifacts ${e.artifact_location}` : '');
      // GPU-hours of the experiment's runs (docs/gpu.md), when they held GPUs.
      const gpu = h('span', { 'data-testid': 'experiment-gpu-hours' });
      meta.append(gpu);
      getGPUHours({ experiment_id: expId })
        .then((g) => {
          const text = gpuHoursText(g);
          if (!scope.disposed && text) gpu.textContent = ' · ' + text;
        })
        .catch(() => {});
      const note = e.tags?.find((t) => t.key === 'mlflow.note.content')?.value;
      if (note) meta.append(h('p', { class: 'note' }, note));
    })
    .catch((e) => meta.replaceChildren(errorBox(e)));

  body.append(list.el);
  renderHeader();
  void search();
  showView(view);
  return h(
    'div',
    { class: 'page experiment' },
    h('div', { class: 'page-head' }, crumbs, title, meta),
    h(
      'div',
      { class: 'toolbar' },
      viewBar,
      h('div', { class: 'filter-box' }, filterInput, filterView, filterErr),
      h('button', { onclick: () => ((filter = filterInput.value.trim()), setQuery({ filter: filter || null }), void search()) }, 'Search'),
      colsBtn,
      compareBtn,
      session.multiUser ? h('button', { onclick: () => permissionsDialog('experiment:' + expId, exp?.name ?? expId) }, 'Permissions') : null,
      countEl,
    ),
    body,
    alt,
  );
}
