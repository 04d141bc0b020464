// A node's page: its health summary (flagged or not, and why), fault
// counts, its GPUs now (the GPU pane for the node) and its history of GPU
// faults across runs, newest first, with the runs that held the GPU
// (docs/gpu.md, "Node health").

import { get, SX } from '../api';
import { gpuPane } from '../components/gpupane';
import { h, link, Scope } from '../dom';
import { fmtTime } from '../lib/format';
import { countsText, eventDuration, kindLabel, NodeEvent, NodeHealth } from '../lib/nodehealth';

export function nodePage(p: Record<string, string>, _q: URLSearchParams, scope: Scope): HTMLElement {
  const node = p.name ?? '';
  document.title = node + ' · GPUs · Sextant';
  const summary = h('div', { class: 'node-summary', 'data-testid': 'node-summary' }, h('p', { class: 'muted' }, 'Loading…'));
  const rows = h('tbody');
  const more = h('button', { class: 'more', hidden: true }, 'Older faults');
  const history = h(
    'section',
    { class: 'node-history', 'aria-label': 'Fault history' },
    h('h2', null, 'Fault history'),
    h('table', { class: 'grid node-events' }, h('thead', null, h('tr', null, h('th', null, 'Time'), h('th', null, 'Kind'), h('th', null, 'GPU'), h('th', null, 'Duration'), h('th', null, 'Message'), h('th', null, 'Runs'))), rows),
    more,
  );
  let token: string | undefined;
  let shown = 0;

  const loadEvents = async () => {
    more.hidden = true;
    try {
      const res = (await get(SX + '/nodes/health', { node, max_results: 100, page_token: token })) as { events: NodeEvent[]; next_page_token?: string };
      if (scope.disposed) return;
      const now = Date.now();
      for (const e of res.events ?? []) {
        shown++;
        rows.append(
          h(
            'tr',
            { class: 'node-event', 'data-kind': e.kind, 'data-gpu': String(e.gpu) },
            h('td', null, fmtTime(e.time_ms)),
            h('td', null, h('span', { class: 'fault-kind fault-' + e.kind }, kindLabel(e.kind) + (e.xid ? ' ' + e.xid : ''))),
            h('td', { title: e.uuid ?? '' }, `GPU ${e.gpu}`, e.model ? h('span', { class: 'muted' }, ' ' + e.model) : null),
            h('td', null, eventDuration(e, now)),
            h('td', null, e.message),
            h('td', { class: 'node-event-runs' }, (e.run_ids ?? []).length ? e.run_ids.map((id) => link('/runs/' + id, id.slice(0, 8))) : h('span', { class: 'muted' }, '–')),
          ),
        );
      }
      if (shown === 0) rows.replaceChildren(h('tr', null, h('td', { colspan: 6, class: 'empty' }, 'No GPU faults recorded for this node.')));
      token = res.next_page_token;
      more.hidden = !token;
      history.dataset.events = String(shown);
    } catch (e: any) {
      history.append(h('p', { class: 'error' }, e.message));
    }
  };
  more.addEventListener('click', () => void loadEvents());

  const loadSummary = async () => {
    try {
      const res = (await get(SX + '/nodes')) as { nodes: NodeHealth[]; rule: string };
      if (scope.disposed) return;
      const n = (res.nodes ?? []).find((x) => x.node === node);
      if (!n) {
        summary.replaceChildren(h('p', { class: 'empty' }, 'No samples or health history for this node.'));
        return;
      }
      summary.dataset.flagged = String(n.flagged);
      summary.replaceChildren(
        n.flagged ? h('p', { class: 'node-flag', 'data-testid': 'node-flag' }, '⚠ Flagged: ' + n.reason) : h('p', { class: 'node-ok' }, 'Not flagged.'),
        h(
          'table',
          { class: 'grid node-counts' },
          h('thead', null, h('tr', null, h('th', null, ''), h('th', null, 'Xid'), h('th', null, 'ECC'), h('th', null, 'Lost'), h('th', null, 'Throttling'))),
          h(
            'tbody',
            null,
            ...(
              [
                ['Last 24 hours', n.counts_24h],
                ['Last 7 days', n.counts_7d],
              ] as const
            ).map(([label, c]) => h('tr', { 'data-window': label }, h('th', null, label), h('td', null, String(c.xid)), h('td', null, String(c.ecc)), h('td', null, String(c.lost)), h('td', null, String(c.throttle)))),
          ),
        ),
        h('p', { class: 'muted' }, countsText(n.counts_7d) ? '' : 'No faults in 7 days. ', 'Rule: ' + res.rule + '.'),
      );
    } catch (e: any) {
      summary.replaceChildren(h('p', { class: 'error' }, e.message));
    }
  };

  void loadSummary();
  void loadEvents();
  return h('div', { class: 'page gpu node-page', 'data-node': node }, h('p', null, link('/gpu', '← All GPUs')), h('h1', null, 'Node ', node), summary, history, gpuPane({ node }, scope));
}
