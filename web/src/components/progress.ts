// The run page's Progress tab: each rank's step time over the run as a
// heatmap (a row per rank, a column per time bucket, white at the run's
// median step time, red slower, blue faster), each rank's median and where
// it runs, and the straggler events the server's watcher raised.
//
// API: GET progress and events/list?kind=straggler (docs/run.md, "Per-rank
// progress and stragglers").

import { get, Run, SX } from '../api';
import { h, Scope } from '../dom';
import { fmtDuration, fmtTime } from '../lib/format';
import { heatmap, ProgressRank, shade } from '../lib/progress';

const COLUMNS = 120;
const CELL_W = 5;
const CELL_H = 14;

function fmtSec(s: number | null): string {
  if (s === null) return '—';
  return s >= 1 ? s.toFixed(2) + ' s' : (s * 1000).toFixed(1) + ' ms';
}

/** progressView shows the run's per-rank progress, refreshed while it runs. */
export function progressView(run: Run, scope: Scope, live: () => boolean, pollMs: number): HTMLElement {
  const id = run.info.run_id;
  const body = h('div', null, h('p', { class: 'muted' }, 'Loading progress…'));
  const events = h('div');
  const load = async () => {
    try {
      const [p, ev] = await Promise.all([
        get(SX + '/progress', { run_id: id, max_points: 2500 }) as Promise<{ ranks?: ProgressRank[] }>,
        get(SX + '/events/list', { run_id: id, kind: 'straggler', limit: 10_000 }) as Promise<{ events?: any[] }>,
      ]);
      if (scope.disposed) return;
      render(p.ranks ?? [], ev.events ?? []);
    } catch (err: any) {
      if (!scope.disposed) body.replaceChildren(h('p', { class: 'error-text' }, String(err?.message ?? err)));
    }
  };
  const render = (ranks: ProgressRank[], evs: any[]) => {
    if (!ranks.length) {
      body.replaceChildren(h('p', { class: 'empty' }, 'No progress reported. Report steps with sextant.progress, or the Lightning and Transformers callbacks (docs/run.md).'));
      events.replaceChildren();
      return;
    }
    const m = heatmap(ranks, COLUMNS);
    const rows = m.rows.map((r) => {
      const c = h('canvas', { width: r.cells.length * CELL_W, height: CELL_H, class: 'heat-row', 'aria-hidden': 'true' }) as HTMLCanvasElement;
      const g = c.getContext('2d');
      if (g)
        r.cells.forEach((v, i) => {
          g.fillStyle = shade(v, m.median);
          g.fillRect(i * CELL_W, 0, CELL_W, CELL_H);
        });
      const pct = r.median !== null && m.median ? Math.round(100 * (r.median / m.median - 1)) : null;
      const rel = pct === null ? '' : `${pct > 0 ? '+' : ''}${pct}%`;
      return h('tr', { 'data-rank': String(r.rank) },
        h('th', null, 'rank ' + r.rank),
        h('td', null, r.node),
        h('td', null, r.gpu !== null ? String(r.gpu) : ''),
        h('td', { class: 'num' }, fmtSec(r.median)),
        h('td', { class: 'num' }, rel),
        h('td', null, c),
      );
    });
    body.replaceChildren(
      h('p', { class: 'muted' },
        `Step time per rank, ${fmtTime(m.fromMs)} to ${fmtTime(m.toMs)}, a column per ${fmtDuration(m.bucketMs)}: white is the run's median step time (${fmtSec(m.median)}), red up to twice it and more, blue down to half.`),
      h('table', { class: 'grid progress-heat', 'data-testid': 'progress-heat' },
        h('thead', null, h('tr', null, h('th', null, 'Rank'), h('th', null, 'Node'), h('th', null, 'GPU'), h('th', null, 'Median step'), h('th', null, 'vs run'), h('th', null, 'Over time'))),
        h('tbody', null, rows),
      ),
    );
    const sorted = [...evs].sort((a, b) => a.time_ms - b.time_ms);
    events.replaceChildren(
      h('h2', null, 'Stragglers'),
      sorted.length
        ? h('table', { class: 'grid stragglers', 'data-testid': 'stragglers' },
            h('thead', null, h('tr', null, h('th', null, 'Since'), h('th', null, 'Rank'), h('th', null, 'Node'), h('th', null, 'GPU'), h('th', null, 'What happened'))),
            h('tbody', null, sorted.map((e) =>
              h('tr', { class: 'sev-' + (e.severity ?? 'warning') },
                h('td', null, fmtTime(e.time_ms)),
                h('td', null, e.attrs?.rank ?? ''),
                h('td', null, e.node ?? ''),
                h('td', null, e.gpu != null ? String(e.gpu) : ''),
                h('td', null, (e.message ?? '') + (e.end_ms ? ` (for ${fmtDuration(e.end_ms - e.time_ms)})` : e.open ? ' (still going on)' : '')),
              ),
            )),
          )
        : h('p', { class: 'empty' }, 'No rank stayed slower than the others (the server flags one above the others’ median by --straggler-margin for --straggler-for).'),
    );
  };
  void load();
  scope.interval(() => {
    if (live() && document.visibilityState === 'visible') void load();
  }, pollMs);
  return h('div', { class: 'run-progress' }, body, events);
}
