// The GPU resources pane: for every GPU, utilisation, memory used,
// temperature and power as small live charts and current values, grouped
// by node. It polls every 10 s, shows at most 2 hours of history, fetches
// at once on Refresh, and stops polling after 5 minutes without
// interaction (saying so) until the user interacts again; a run's pane
// stops once the run has ended and says so. A node whose last sample is
// old is dimmed; each node's sparklines start at its first sample (at
// least a minute back), so a new node is not a sliver. Timings come
// from config (injectable for tests).
//
// API (/api/2.0/sextant/gpu/..., docs/gpu.md): latest (the newest sample
// of each node) and series (per GPU and field, [ts_ms, value] points over
// from_ms..to_ms downsampled to `points`); and /nodes, the nodes' health,
// to mark flagged nodes (each node's name links to its page).

import { get, SX } from '../api';
import { config } from '../config';
import { h, Scope } from '../dom';
import { fmtAgo, fmtBytes, fmtDuration } from '../lib/format';
import { NodeHealth, nodeHref } from '../lib/nodehealth';
import { drawSparkline } from './sparkline';

interface GPUNow {
  index: number;
  uuid: string;
  name: string;
  error?: string;
  util: number | null;
  mem_used: number | null;
  mem_total: number | null;
  temp: number | null;
  power: number | null;
  power_limit: number | null;
}
interface NodeNow {
  node: string;
  run_id: string | null;
  node_rank: number | null;
  ts_ms: number;
  gpus: GPUNow[];
}
interface GPUSeries {
  node: string;
  node_rank: number | null;
  index: number;
  name: string;
  series: Record<string, (number | null)[][]>;
}
interface SeriesAnswer {
  from_ms: number;
  to_ms: number;
  gpus: GPUSeries[];
}

const FIELDS: { key: string; label: string; color: string; max?: number }[] = [
  { key: 'util', label: 'Utilisation', color: '#2ca02c', max: 100 },
  { key: 'mem_used', label: 'Memory', color: '#1f77b4' },
  { key: 'temp', label: 'Temperature', color: '#d62728' },
  { key: 'power', label: 'Power', color: '#ff7f0e' },
];

const ACTIVITY = ['pointerdown', 'pointermove', 'keydown', 'wheel', 'scroll', 'focusin', 'touchstart'];

export interface GpuPaneOpts {
  runId?: string;
  node?: string;
  compact?: boolean;
  /** live says whether the run still runs (a run's pane): once it does not, the pane stops polling and says so. */
  live?: () => boolean;
}

/** The shortest span a node's sparklines cover: a node that has just started fills a part of them, not all (ms). */
const MIN_SPARK_MS = 60_000;

export function gpuPane(opts: GpuPaneOpts, scope: Scope): HTMLElement {
  const body = h('div', { class: 'gpu-nodes' });
  const state = h('span', { class: 'gpu-state muted', 'data-testid': 'gpu-state' });
  const updated = h('span', { class: 'muted' });
  const spanEl = h('span', { class: 'muted', 'data-testid': 'gpu-span' });
  const refresh = h('button', { class: 'refresh', title: 'Fetch the latest values now' }, '↻ Refresh');
  const pane = h(
    'section',
    { class: 'gpu-pane', 'aria-label': 'GPU resources' },
    h('div', { class: 'toolbar' }, h('h2', null, 'GPU resources'), refresh, state, updated, spanEl),
    body,
  );
  let lastActivity = Date.now();
  let paused = false;
  let polls = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let inflight = false;
  let lastFetch = 0;

  const ended = () => opts.live != null && !opts.live();
  const setPaused = (p: boolean) => {
    paused = p;
    pane.dataset.paused = String(p);
    pane.dataset.live = String(!ended());
    pane.classList.toggle('paused', p);
    state.textContent = ended()
      ? 'The run has ended: its last samples.'
      : p
        ? `Paused: no interaction for ${Math.round(config.gpuIdleMs / 60000) || '<1'} min. Move the mouse or press Refresh to resume.`
        : `Live · every ${config.gpuPollMs >= 1000 ? config.gpuPollMs / 1000 + ' s' : config.gpuPollMs + ' ms'}`;
  };

  const schedule = () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(tick, config.gpuPollMs);
  };

  const tick = async () => {
    timer = undefined;
    if (scope.disposed) return;
    if (ended()) {
      setPaused(false); // says so; no timer: a finished run's samples do not change
      return;
    }
    if (Date.now() - lastActivity >= config.gpuIdleMs) {
      setPaused(true);
      return; // no timer: the next interaction resumes
    }
    await fetchNow();
    schedule();
  };

  const onActivity = () => {
    lastActivity = Date.now();
    if (paused && !ended()) {
      setPaused(false);
      void fetchNow();
      schedule();
    }
  };
  for (const ev of ACTIVITY) scope.listen(document, ev, onActivity, { passive: true, capture: true });
  scope.add(() => timer !== undefined && clearTimeout(timer));
  refresh.addEventListener('click', () => {
    onActivity();
    void fetchNow();
    schedule();
  });

  const fetchNow = async () => {
    if (inflight) return;
    inflight = true;
    const now = Date.now();
    const sel = { run_id: opts.runId, node: opts.node };
    try {
      const [latest, series, health] = await Promise.all([
        get(SX + '/gpu/latest', sel) as Promise<{ nodes: NodeNow[] }>,
        get(SX + '/gpu/series', { ...sel, from_ms: now - config.gpuHistoryMs, to_ms: now, points: 240, fields: FIELDS.map((f) => f.key).concat('mem_total').join(',') }) as Promise<SeriesAnswer>,
        // Best effort: a server without node health still shows the GPUs.
        (get(SX + '/nodes') as Promise<{ nodes: NodeHealth[] }>).catch(() => null),
      ]);
      if (scope.disposed) return;
      polls++;
      lastFetch = Date.now();
      pane.dataset.polls = String(polls);
      draw(latest.nodes ?? [], series, now, new Map((health?.nodes ?? []).map((n) => [n.node, n])));
      updated.textContent = 'updated ' + new Date(lastFetch).toLocaleTimeString();
    } catch (e: any) {
      body.replaceChildren(h('p', { class: e.status === 404 ? 'empty' : 'error' }, e.status === 404 ? 'GPU monitoring is not enabled on this server.' : e.message));
    } finally {
      inflight = false;
    }
  };

  const draw = (nodes: NodeNow[], series: SeriesAnswer, now: number, health: Map<string, NodeHealth>) => {
    const windowFrom = Math.max(series.from_ms ?? now - config.gpuHistoryMs, now - config.gpuHistoryMs);
    const to = series.to_ms ?? now;
    let earliest = Infinity;
    const seriesOf = new Map<string, GPUSeries>();
    for (const g of series.gpus ?? []) {
      seriesOf.set(g.node + '/' + g.index, g);
      for (const pts of Object.values(g.series ?? {})) for (const p of pts) if ((p[0] ?? 0) >= windowFrom && (p[0] ?? 0) < earliest) earliest = p[0] ?? 0;
    }
    // Less history than the window: the sparklines start at the first
    // sample and use their whole width (not squeezed at the right edge).
    const from = Number.isFinite(earliest) && earliest < to ? Math.max(windowFrom, earliest) : windowFrom;
    spanEl.textContent = to - from >= 60_000 ? `last ${fmtDuration(to - from)}` : '';
    if (nodes.length === 0) {
      body.replaceChildren(h('p', { class: 'empty' }, opts.runId ? 'No GPU samples for this run. Start `sextant agent` (or `sextant run`) on its nodes.' : 'No GPU samples yet. Start `sextant agent` on your GPU machines.'));
      pane.dataset.spanMs = '0';
      return;
    }
    nodes.sort((a, b) => (a.node_rank ?? 1e9) - (b.node_rank ?? 1e9) || a.node.localeCompare(b.node));
    const groups = nodes.map((n) => {
      const stale = now - n.ts_ms > Math.max(60_000, 3 * config.gpuPollMs);
      // Each node's sparklines start at its own first sample (at least
      // MIN_SPARK_MS back): a node that joined minutes ago is drawn over
      // the width, not as a sliver at the right of the others' hours.
      let first = Infinity;
      for (const g of n.gpus) for (const pts of Object.values(seriesOf.get(n.node + '/' + g.index)?.series ?? {})) for (const p of pts) if ((p[0] ?? 0) >= from && (p[0] ?? Infinity) < first) first = p[0] ?? Infinity;
      const nodeFrom = Number.isFinite(first) ? Math.max(from, Math.min(first, to - MIN_SPARK_MS)) : from;
      const cards = n.gpus.map((g) => {
        const s = seriesOf.get(n.node + '/' + g.index);
        const values: Record<string, string> = {
          util: g.util == null ? '–' : Math.round(g.util) + '%',
          mem_used: g.mem_used == null ? '–' : fmtBytes(g.mem_used) + (g.mem_total ? ' / ' + fmtBytes(g.mem_total) : ''),
          temp: g.temp == null ? '–' : Math.round(g.temp) + ' °C',
          power: g.power == null ? '–' : Math.round(g.power) + ' W' + (g.power_limit ? ' / ' + Math.round(g.power_limit) + ' W' : ''),
        };
        const metrics = FIELDS.map((f) => {
          const canvas = h('canvas', { class: 'spark', 'aria-label': f.label + ' history' });
          const pts = s?.series?.[f.key] ?? [];
          const ts: number[] = [];
          const vs: (number | null)[] = [];
          for (const p of pts) {
            const t = p[0] ?? 0;
            if (t < nodeFrom) continue; // never more than the window
            ts.push(t);
            vs.push(p[p.length === 4 ? 2 : 1] ?? null);
          }
          const memTotal = s?.series?.mem_total?.find((p) => p[1] != null)?.[1] ?? g.mem_total ?? undefined;
          requestAnimationFrame(() =>
            drawSparkline(canvas, ts, vs, nodeFrom, to, { width: 150, height: 36, color: f.color, min: 0, max: f.key === 'util' ? 100 : f.key === 'mem_used' ? memTotal ?? undefined : f.key === 'power' ? g.power_limit ?? undefined : f.key === 'temp' ? 100 : undefined }),
          );
          return h('div', { class: 'gpu-metric', 'data-field': f.key }, h('div', { class: 'gpu-label' }, f.label), h('div', { class: 'gpu-value' }, values[f.key]), canvas);
        });
        return h(
          'div',
          { class: 'gpu-card', 'data-gpu': String(g.index) },
          h('div', { class: 'gpu-name' }, `GPU ${g.index}`, ' ', h('span', { class: 'muted' }, g.name)),
          g.error ? h('div', { class: 'error-text' }, g.error) : null,
          h('div', { class: 'gpu-metrics' }, metrics),
        );
      });
      return h(
        'div',
        { class: 'gpu-node' + (stale ? ' stale-node' : ''), 'data-node': n.node, 'data-stale': String(stale), 'data-from-ms': String(nodeFrom), title: stale ? 'No sample for ' + fmtAgo(n.ts_ms, now).replace(/ ago$/, '') + ': the agent stopped or the node is gone' : null },
        h(
          'h3',
          null,
          h('a', { href: nodeHref(n.node), class: 'node-link', title: 'Health history of ' + n.node }, n.node),
          health.get(n.node)?.flagged ? h('span', { class: 'node-flag', title: health.get(n.node)?.reason ?? '' }, '⚠ flagged: ' + (health.get(n.node)?.reason ?? '')) : null,
          n.node_rank != null ? h('span', { class: 'muted' }, ` · node rank ${n.node_rank}`) : null,
          h('span', { class: 'muted' + (stale ? ' stale' : '') }, ` · ${stale ? 'last ' : ''}sample ${fmtAgo(n.ts_ms, now)}${stale ? ' (stale)' : ''}`),
        ),
        h('div', { class: 'gpu-cards' }, cards),
      );
    });
    body.replaceChildren(...groups);
    pane.dataset.spanMs = String(Number.isFinite(earliest) ? Math.max(0, to - earliest) : 0);
    pane.dataset.fromMs = String(from);
    pane.dataset.gpus = String(nodes.reduce((a, n) => a + n.gpus.length, 0));
  };

  setPaused(false);
  void fetchNow().then(() => (ended() ? setPaused(false) : schedule()));
  void opts.compact;
  return pane;
}
