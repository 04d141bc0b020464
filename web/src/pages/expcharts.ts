// The experiment's chart view and plots view. Charts: a chart for every
// metric key of the runs shown (the selected ones, else the first N in the
// table's order), in sections by key prefix, searchable, collapsible and
// virtualised (components/board); grouped by a param or tag, every run
// that matches the filter is drawn as its group's mean over a min–max
// band. Plots: parallel coordinates and a scatter plot of the same runs'
// params and latest metrics.

import type { Run } from '../api';
import { BoardChart, ChartBoard, keyCharts } from '../components/board';
import { ChartGroup, ChartRun, latestSteps, linesOf } from '../components/chart';
import { RunPlots } from '../components/runplots';
import { h, Scope } from '../dom';
import { startWorker } from '../lib/fetchq';
import { colour } from '../lib/format';
import { GroupBy, groupByString, groupRuns, parseGroupBy } from '../lib/groups';
import { setQuery } from '../router';
import { groupOptions } from './compare';

/** Runs a grouped chart draws at most (10 requests of 100 runs per chart). */
export const MAX_GROUPED_RUNS = 1000;
const FIRST = [10, 20, 50, 100];

export interface ExpViewOpts {
  expId: string;
  runs: () => Run[];
  selected: () => Set<string>;
  /** whether every run of the filter has arrived */
  complete: () => boolean;
  live: () => boolean;
}

export interface ExpView {
  el: HTMLElement;
  /** refresh redraws after new runs arrived or the selection changed */
  refresh: () => void;
}

interface Shown {
  runs: Run[];
  /** why these runs: "3 selected runs", "the first 10 runs" */
  why: string;
  groups: { value: string; runs: Run[] }[] | null;
}

function pickRuns(o: ExpViewOpts, first: number, by: GroupBy | null): Shown {
  const all = o.runs();
  if (by) {
    const runs = all.slice(0, MAX_GROUPED_RUNS);
    const more = all.length > MAX_GROUPED_RUNS ? ` (the first ${MAX_GROUPED_RUNS.toLocaleString()} of ${all.length.toLocaleString()})` : '';
    return { runs, why: `${runs.length.toLocaleString()} runs${more}${o.complete() ? '' : ', more loading'}`, groups: groupRuns(runs, by) };
  }
  const sel = o.selected();
  if (sel.size) {
    const runs = all.filter((r) => sel.has(r.info.run_id)).slice(0, 100);
    return { runs, why: `${runs.length} selected run${runs.length === 1 ? '' : 's'}`, groups: null };
  }
  const runs = all.slice(0, first);
  return { runs, why: `the first ${runs.length} run${runs.length === 1 ? '' : 's'} of the table (select runs to choose)`, groups: null };
}

function metricKeysOf(runs: readonly Run[]): string[] {
  const keys = new Set<string>();
  for (const r of runs) for (const m of r.data.metrics) keys.add(m.key);
  return [...keys];
}

/** experimentCharts is the chart view of an experiment. */
export function experimentCharts(o: ExpViewOpts, q: URLSearchParams, scope: Scope): ExpView {
  startWorker(); // while the runs load: the first charts' requests need it
  let first = FIRST.includes(Number(q.get('first'))) ? Number(q.get('first')) : 10;
  let by = parseGroupBy(q.get('group'));
  const firstSel = h('select', { 'aria-label': 'Runs shown', name: 'first-runs' }, FIRST.map((n) => h('option', { value: String(n), selected: n === first }, `first ${n}`)));
  const groupSel = h('select', { 'aria-label': 'Group by', name: 'group-by' });
  const why = h('span', { class: 'muted', 'data-testid': 'charts-runs' });
  const chips = h('div', { class: 'run-chips' });
  let shown: Shown = { runs: [], why: '', groups: null };
  let sig = '';

  const charts = (): BoardChart[] => {
    const colours = new Map<string, string>();
    const chartRuns: ChartRun[] = shown.runs.map((r, i) => {
      colours.set(r.info.run_id, colour(i));
      return { id: r.info.run_id, name: r.info.run_name || r.info.run_id, color: colour(i), startTime: r.info.start_time };
    });
    const groups: ChartGroup[] | null = shown.groups
      ? shown.groups.map((g, i) => ({ name: `${by!.key}=${g.value}`, color: colour(i), runs: g.runs.map((r) => ({ runId: r.info.run_id, startTime: r.info.start_time })) }))
      : null;
    return keyCharts(metricKeysOf(shown.runs), (key) => (groups ? { lines: [], groups, groupKey: key } : { lines: linesOf(key, chartRuns) }));
  };

  const board = new ChartBoard(
    {
      charts: [],
      live: o.live,
      storeKey: 'sextant.board.exp.' + o.expId,
      empty: 'The runs shown have logged no metrics.',
      controls: [h('label', null, 'Runs ', firstSel), h('label', null, 'Group by ', groupSel)],
    },
    scope,
  );

  const drawChips = () => {
    why.textContent = 'Showing ' + shown.why;
    const items = shown.groups
      ? shown.groups.map((g, i) => ({ name: `${by!.key}=${g.value}`, extra: `${g.runs.length} run${g.runs.length === 1 ? '' : 's'}`, color: colour(i) }))
      : shown.runs.map((r, i) => ({ name: r.info.run_name || r.info.run_id, extra: '', color: colour(i) }));
    chips.replaceChildren(
      ...items.slice(0, 100).map((it) => {
        const sw = h('i', { class: 'swatch' });
        sw.style.background = it.color;
        return h('span', { class: 'legend-item', title: it.name }, sw, h('span', { class: 'legend-name' }, it.name), it.extra ? h('span', { class: 'legend-group' }, it.extra) : null);
      }),
    );
  };

  const refresh = () => {
    shown = pickRuns(o, first, by);
    groupSel.replaceChildren(...groupOptions(o.runs().slice(0, MAX_GROUPED_RUNS), by));
    firstSel.disabled = !!by || o.selected().size > 0;
    const next = (by ? groupByString(by) + '|' + shown.groups!.map((g) => g.value + ':' + g.runs.length).join(',') : shown.runs.map((r) => r.info.run_id).join()) + '|' + shown.runs.length;
    drawChips();
    if (next === sig) return;
    sig = next;
    board.setCharts(charts(), latestSteps(shown.runs));
  };

  firstSel.addEventListener('change', () => {
    first = Number(firstSel.value);
    setQuery({ first: first === 10 ? null : String(first) });
    refresh();
  });
  groupSel.addEventListener('change', () => {
    by = parseGroupBy(groupSel.value);
    setQuery({ group: groupByString(by) || null });
    refresh();
  });
  refresh();
  return { el: h('div', { class: 'exp-charts' }, h('div', { class: 'row' }, why), chips, board.el), refresh };
}

/** experimentPlots is the plots view: parallel coordinates and a scatter plot of the runs shown. */
export function experimentPlots(o: ExpViewOpts, scope: Scope): ExpView {
  const why = h('p', { class: 'muted', 'data-testid': 'plots-runs' });
  const pick = () => {
    const sel = o.selected();
    const all = o.runs();
    const runs = sel.size ? all.filter((r) => sel.has(r.info.run_id)) : all.slice(0, MAX_GROUPED_RUNS);
    why.textContent = sel.size ? `${runs.length} selected runs` : `${runs.length.toLocaleString()} runs${all.length > runs.length ? ` (the first ${MAX_GROUPED_RUNS.toLocaleString()})` : ''}: select runs in the table to plot fewer`;
    return runs;
  };
  const plots = new RunPlots({ runs: pick() }, scope);
  return { el: h('div', { class: 'exp-plots' }, why, plots.el), refresh: () => plots.setRuns(pick()) };
}
