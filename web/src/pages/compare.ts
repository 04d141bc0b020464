// Compare runs: up to 100 runs overlaid per metric (or, grouped by a param
// or tag, one line per group with its mean over a min–max band), a
// parallel-coordinates and a scatter plot of their params and metrics, and
// a params diff.

import { getExperiment, getRun, Run } from '../api';
import { ChartBoard, keyCharts } from '../components/board';
import { ChartRun, latestSteps, linesOf } from '../components/chart';
import { RunPlots } from '../components/runplots';
import { errorBox, h, link, Scope, spinner } from '../dom';
import { colour, fmtNumber } from '../lib/format';
import { GroupBy, groupByString, groupRuns, parseGroupBy } from '../lib/groups';
import { naturalCompare } from '../lib/keys';
import { setQuery } from '../router';

export function compareRunsPage(_p: Record<string, string>, q: URLSearchParams, scope: Scope): HTMLElement {
  const ids = [...new Set((q.get('runs') ?? '').split(',').filter(Boolean))].slice(0, 100);
  const body = h('div', null, spinner());
  const where = h('div', { class: 'muted' });
  const page = h('div', { class: 'page compare' }, h('div', { class: 'page-head' }, h('h1', null, `Compare ${ids.length} runs`), where), body);
  if (ids.length === 0) {
    body.replaceChildren(h('p', { class: 'empty' }, 'Select runs in an experiment and press Compare.'));
    return page;
  }
  void (async () => {
    try {
      const runs = await Promise.all(ids.map((id) => getRun(id)));
      if (scope.disposed) return;
      body.replaceChildren(render(runs, parseGroupBy(q.get('group')) ?? legacyGroup(q.get('group')), scope));
      // Name the experiments the runs are in.
      const exps = [...new Set(runs.map((r) => r.info.experiment_id))];
      const names = await Promise.all(exps.map((e) => getExperiment(e).then((x) => [e, x.name] as const, () => [e, 'Experiment ' + e] as const)));
      if (!scope.disposed) where.replaceChildren('in ', ...names.flatMap(([e, n], i) => [i ? ', ' : '', link('/experiments/' + encodeURIComponent(e), n)]));
    } catch (e) {
      body.replaceChildren(errorBox(e));
    }
  })();
  return page;
}

/** legacyGroup reads the older ?group=<param> links. */
function legacyGroup(g: string | null): GroupBy | null {
  return g ? { kind: 'param', key: g } : null;
}

/** groupOptions lists the params and tags (not mlflow.*) to group by, as a select's options. */
export function groupOptions(runs: readonly Run[], current: GroupBy | null): HTMLOptionElement[] {
  const params = new Set<string>();
  const tags = new Set<string>();
  for (const r of runs) {
    for (const p of r.data.params) params.add(p.key);
    for (const t of r.data.tags) if (!t.key.startsWith('mlflow.')) tags.add(t.key);
  }
  const cur = groupByString(current);
  return [
    h('option', { value: '' }, 'none'),
    ...[...params].sort(naturalCompare).map((k) => h('option', { value: 'params.' + k, selected: cur === 'params.' + k }, 'param ' + k)),
    ...[...tags].sort(naturalCompare).map((k) => h('option', { value: 'tags.' + k, selected: cur === 'tags.' + k }, 'tag ' + k)),
  ];
}

function render(runs: Run[], group: GroupBy | null, scope: Scope): HTMLElement {
  const paramKeys = [...new Set(runs.flatMap((r) => r.data.params.map((p) => p.key)))].sort(naturalCompare);
  const metricKeys = [...new Set(runs.flatMap((r) => r.data.metrics.map((m) => m.key)))];
  const param = (r: Run, k: string) => r.data.params.find((p) => p.key === k)?.value;
  const chartRuns: ChartRun[] = runs.map((r, i) => ({ id: r.info.run_id, name: r.info.run_name || r.info.run_id, color: colour(i), startTime: r.info.start_time }));
  let by = group;
  const groupsFor = (g: GroupBy) => groupRuns(runs, g).map((x, i) => ({ name: `${g.key}=${x.value}`, color: colour(i), runs: x.runs.map((r) => ({ runId: r.info.run_id, startTime: r.info.start_time })), members: x.runs }));
  const colourOf = () => {
    if (!by) return undefined;
    const m = new Map<string, string>();
    for (const g of groupsFor(by)) for (const r of g.members) m.set(r.info.run_id, g.color);
    return (r: Run) => m.get(r.info.run_id) ?? null;
  };
  const charts = () =>
    keyCharts(metricKeys, (key) => {
      if (!by) return { lines: linesOf(key, chartRuns) };
      return { lines: [], groups: groupsFor(by), groupKey: key };
    });
  const groupSel = h('select', { 'aria-label': 'Group by', name: 'group-by' }, groupOptions(runs, by));
  const board = new ChartBoard({ charts: charts(), estimate: latestSteps(runs), live: () => false, storeKey: 'sextant.board.compare', controls: [h('label', null, 'Group by ', groupSel)], fit: true }, scope);
  const plots = new RunPlots({ runs, colorOf: colourOf() }, scope);
  groupSel.addEventListener('change', () => {
    by = parseGroupBy(groupSel.value);
    setQuery({ group: groupByString(by) || null });
    board.setCharts(charts());
    plots.setRuns(runs, colourOf());
  });

  const onlyDiff = h('input', { type: 'checkbox', checked: true });
  const diff = h('div', { class: 'params-diff' });
  const drawDiff = () => {
    const keys = paramKeys.filter((k) => !onlyDiff.checked || new Set(runs.map((r) => param(r, k) ?? '\u0000')).size > 1);
    diff.replaceChildren(
      keys.length
        ? h(
            'div',
            { class: 'scroll-x' },
            h(
              'table',
              { class: 'grid diff' },
              h('thead', null, h('tr', null, h('th', null, 'Param'), runs.map((r) => h('th', { title: r.info.run_name || r.info.run_id }, link('/runs/' + encodeURIComponent(r.info.run_id), r.info.run_name || r.info.run_id))))),
              h(
                'tbody',
                null,
                keys.map((k) => {
                  const vals = runs.map((r) => param(r, k));
                  const differs = new Set(vals.map((v) => v ?? '\u0000')).size > 1;
                  return h('tr', { class: differs ? 'differs' : '' }, h('th', null, k), vals.map((v) => h('td', null, v ?? '—')));
                }),
              ),
            ),
          )
        : h('p', { class: 'empty' }, onlyDiff.checked ? 'The runs have the same params.' : 'No params.'),
    );
  };
  onlyDiff.addEventListener('change', drawDiff);
  drawDiff();
  const runHead = () => h('tr', null, h('th', null, ''), runs.map((r) => h('th', { title: r.info.run_name || r.info.run_id }, link('/runs/' + encodeURIComponent(r.info.run_id), r.info.run_name || r.info.run_id))));
  const metricsTable = metricKeys.length
    ? h(
        'div',
        { class: 'scroll-x' },
        h(
          'table',
          { class: 'grid diff compare-metrics', 'data-testid': 'compare-metrics' },
          h('thead', null, runHead()),
          h(
            'tbody',
            null,
            [...metricKeys].sort(naturalCompare).map((k) => {
              const vals = runs.map((r) => r.data.metrics.find((m) => m.key === k));
              return h('tr', null, h('th', null, k), vals.map((m) => h('td', { class: 'num', title: m ? `step ${m.step}` : null }, m ? fmtNumber(m.value) : '—')));
            }),
          ),
        ),
      )
    : h('p', { class: 'empty' }, 'The runs logged no metrics.');
  return h(
    'div',
    null,
    h('h2', null, 'Metrics'),
    board.el,
    h('h2', null, 'Latest metric values'),
    metricsTable,
    h('h2', null, 'Params and metrics'),
    plots.el,
    h('h2', null, 'Params ', h('label', { class: 'small' }, onlyDiff, ' only differences')),
    diff,
  );
}
