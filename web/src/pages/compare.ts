// Compare runs: up to 100 runs overlaid per metric, coloured by a param
// (group by), and a params diff.

import { getRun, Run } from '../api';
import { ChartRun } from '../components/chart';
import { ChartGrid } from '../components/chartgrid';
import { errorBox, h, link, Scope, spinner } from '../dom';
import { colour } from '../lib/format';
import { setQuery } from '../router';

export function compareRunsPage(_p: Record<string, string>, q: URLSearchParams, scope: Scope): HTMLElement {
  const ids = [...new Set((q.get('runs') ?? '').split(',').filter(Boolean))].slice(0, 100);
  const body = h('div', null, spinner());
  const page = h('div', { class: 'page compare' }, h('div', { class: 'page-head' }, h('h1', null, `Compare ${ids.length} runs`)), body);
  if (ids.length === 0) {
    body.replaceChildren(h('p', { class: 'empty' }, 'Select runs in an experiment and press Compare.'));
    return page;
  }
  void (async () => {
    try {
      const runs: Run[] = [];
      for (let i = 0; i < ids.length; i += 16) runs.push(...(await Promise.all(ids.slice(i, i + 16).map((id) => getRun(id)))));
      if (scope.disposed) return;
      body.replaceChildren(render(runs, q.get('group') ?? '', scope));
    } catch (e) {
      body.replaceChildren(errorBox(e));
    }
  })();
  return page;
}

function render(runs: Run[], group: string, scope: Scope): HTMLElement {
  const paramKeys = [...new Set(runs.flatMap((r) => r.data.params.map((p) => p.key)))].sort();
  const metricKeys = [...new Set(runs.flatMap((r) => r.data.metrics.map((m) => m.key)))].sort();
  const param = (r: Run, k: string) => r.data.params.find((p) => p.key === k)?.value;
  const chartRuns = (g: string): ChartRun[] => {
    const groups = new Map<string, number>();
    return runs.map((r, i) => {
      const gv = g ? param(r, g) ?? '(none)' : '';
      if (g && !groups.has(gv)) groups.set(gv, groups.size);
      return { id: r.info.run_id, name: r.info.run_name || r.info.run_id, color: colour(g ? groups.get(gv)! : i), startTime: r.info.start_time, group: g ? `${g}=${gv}` : undefined };
    });
  };
  const groupSel = h('select', { 'aria-label': 'Group by' }, h('option', { value: '' }, 'none'), paramKeys.map((k) => h('option', { value: k, selected: k === group }, k)));
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
              h('thead', null, h('tr', null, h('th', null, 'Param'), runs.map((r) => h('th', null, link('/runs/' + r.info.run_id, r.info.run_name || r.info.run_id))))),
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
  const grid = new ChartGrid({ runs: chartRuns(group), keys: metricKeys, live: () => false }, scope);
  groupSel.addEventListener('change', () => {
    setQuery({ group: groupSel.value || null });
    grid.setRuns(chartRuns(groupSel.value));
  });
  return h(
    'div',
    null,
    h('div', { class: 'toolbar' }, h('label', null, 'Group by param ', groupSel)),
    h('h2', null, 'Metrics'),
    grid.el,
    h('h2', null, 'Params ', h('label', { class: 'small' }, onlyDiff, ' only differences')),
    diff,
  );
}
