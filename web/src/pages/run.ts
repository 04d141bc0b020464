// The run page: overview (status, duration, who, source, the editable
// description, params, tags, comments), metric charts, the time line,
// per-rank progress, system metrics, logs, artifacts, checkpoints and the
// GPU pane, as tabs.

import { addComment, deleteComment, get, getExperiment, getRun, listComments, Run, runArtifacts, setTag, SX } from '../api';
import { artifactsView } from '../components/artifacts';
import { BoardChart, ChartBoard, keyCharts } from '../components/board';
import { ChartRun, linesOf } from '../components/chart';
import { gpuPane } from '../components/gpupane';
import { LogsView } from '../components/logs';
import { progressView } from '../components/progress';
import { gpuHealthList, Timeline } from '../components/timeline';
import { config } from '../config';
import { errorBox, h, link, Scope, spinner } from '../dom';
import { colour, fmtDuration, fmtNumber, fmtTime } from '../lib/format';
import { breakdownText, getGoodput, goodputText } from '../lib/goodput';
import { getGPUHours, gpuHoursText } from '../lib/gpuhours';
import { gpuKey, systemCharts } from '../lib/keys';
import { childName, folderCrumbs } from '../lib/wspath';
import { setQuery } from '../router';
import { session } from '../session';
import { checkpointsView } from './checkpoints';
import { runModels } from './models';

const TABS = ['overview', 'metrics', 'timeline', 'progress', 'system', 'logs', 'artifacts', 'checkpoints', 'gpu'] as const;
type Tab = (typeof TABS)[number];
const LABELS: Record<Tab, string> = { overview: 'Overview', metrics: 'Metrics', timeline: 'Timeline', progress: 'Progress', system: 'System metrics', logs: 'Logs', artifacts: 'Artifacts', checkpoints: 'Checkpoints', gpu: 'GPU' };

function kvTable(rows: [string, string | Node][], empty: string): HTMLElement {
  if (rows.length === 0) return h('p', { class: 'empty' }, empty);
  return h('table', { class: 'grid kv' }, h('tbody', null, rows.map(([k, v]) => h('tr', null, h('th', null, k), h('td', null, v)))));
}

export function runPage(p: Record<string, string>, q: URLSearchParams, scope: Scope): HTMLElement {
  const runId = p.id;
  const head = h('div', { class: 'page-head' }, h('h1', null, 'Run ' + runId));
  const tabBar = h('nav', { class: 'tabs', role: 'tablist' });
  const content = h('div', { class: 'tab-content' }, spinner());
  let run: Run | null = null;
  let tab: Tab = (TABS as readonly string[]).includes(q.get('tab') ?? '') ? (q.get('tab') as Tab) : 'overview';
  let tabScope = new Scope();
  scope.add(() => tabScope.dispose());

  const isLive = () => run?.info.status === 'RUNNING';

  // The log line to open the logs tab at (from the timeline); 0: the end.
  let logLine = Number(q.get('line') ?? 0) || 0;
  const openLog = (line: number) => {
    logLine = line;
    showTab('logs');
  };
  const showTab = (t: Tab) => {
    tab = t;
    setQuery({ tab: t === 'overview' ? null : t, line: t === 'logs' && logLine ? String(logLine) : null });
    for (const b of tabBar.querySelectorAll('button')) b.setAttribute('aria-selected', String(b.dataset.tab === t));
    tabScope.dispose();
    tabScope = new Scope();
    if (!run) return;
    content.replaceChildren(renderTab(t, run, tabScope));
  };

  // The breadcrumb names the run's experiment (its folders link to the
  // workspace); until it is known, its id.
  const crumbs = h('nav', { class: 'crumbs', 'aria-label': 'Experiment', 'data-testid': 'run-crumbs' });
  const showCrumbs = (expId: string, name: string | null) => {
    const expLink = '/experiments/' + encodeURIComponent(expId);
    if (!name) {
      crumbs.replaceChildren(link(expLink, 'Experiment ' + expId), h('span', { class: 'sep' }, '/'));
      return;
    }
    // Every folder leads somewhere: those that were never created exist
    // because the experiment lies under them.
    const items: (HTMLElement | string)[] = [];
    for (const c of folderCrumbs(name)) items.push(link(c.href, c.label), h('span', { class: 'sep' }, '/'));
    items.push(link(expLink, childName(name)));
    crumbs.replaceChildren(...items, h('span', { class: 'sep' }, '/'));
  };
  let expShown = '';

  const renderHead = (r: Run) => {
    const i = r.info;
    if (expShown !== i.experiment_id) {
      expShown = i.experiment_id;
      showCrumbs(i.experiment_id, null);
      getExperiment(i.experiment_id)
        .then((e) => !scope.disposed && showCrumbs(i.experiment_id, e.name))
        .catch(() => {});
    }
    const dur = i.start_time ? fmtDuration((i.end_time || Date.now()) - i.start_time) : '';
    head.replaceChildren(
      crumbs,
      h('h1', null, i.run_name || i.run_id, ' ', h('span', { class: 'status status-' + String(i.status).toLowerCase(), 'data-testid': 'run-status' }, i.status)),
      h('div', { class: 'muted' }, `${i.run_id} · started ${fmtTime(i.start_time)}${dur ? ' · ' + dur : ''}${i.user_id ? ' · ' + i.user_id : ''}`),
    );
    document.title = (i.run_name || i.run_id) + ' · Sextant';
  };

  const renderTab = (t: Tab, r: Run, s: Scope): HTMLElement => {
    const metricKeys = [...new Set(r.data.metrics.map((m) => m.key))].sort();
    const chartRun: ChartRun[] = [{ id: r.info.run_id, name: r.info.run_name || r.info.run_id, color: colour(0), startTime: r.info.start_time }];
    switch (t) {
      case 'overview':
        return overview(r, s);
      case 'metrics':
        return new ChartBoard(
          { charts: keyCharts(metricKeys.filter((k) => !k.startsWith('system/') && !k.startsWith('sextant/progress/')), (key) => ({ lines: linesOf(key, chartRun) })), live: isLive, storeKey: 'sextant.board.run', empty: 'This run has logged no metrics.' },
          s,
        ).el;
      case 'system':
        return new ChartBoard(
          {
            charts: systemBoard(r, metricKeys.filter((k) => k.startsWith('system/'))),
            live: isLive,
            storeKey: 'sextant.board.system',
            // Samples in time: against wall-clock time, not step, unless picked.
            settingsKey: 'sextant.chart.settings.system',
            xMode: 'wall',
            sectionLabel: (n) => n,
            empty: 'No system metrics (keys system/...). Enable them with mlflow.enable_system_metrics_logging() or run `sextant agent`.',
          },
          s,
        ).el;
      case 'timeline':
        return new Timeline({ run: r, onOpenLog: openLog }, s).el;
      case 'progress':
        return progressView(r, s, isLive, config.runPollMs);
      case 'logs': {
        const line = logLine;
        logLine = 0;
        return new LogsView(r.info.run_id, s, line || undefined).el;
      }
      case 'artifacts':
        // MLflow 3 keeps a logged model's files with the model, not the run: list them first.
        return h('div', { class: 'run-artifacts' }, runModels(r, s, { files: true }), h('h2', null, 'Run artifacts'), artifactsView(runArtifacts(r.info), s, 'No run artifacts.'));
      case 'checkpoints':
        return checkpointsView(r, s);
      case 'gpu':
        return h('div', null, gpuPane({ runId: r.info.run_id, live: isLive }, s), gpuHealthList(r.info.run_id, s, (t) => {
          // The log at that moment: the first line from then on.
          get(SX + '/logs/density', { run_id: r.info.run_id, from_ms: t, to_ms: t + 60_000, buckets: 1 })
            .then((d: any) => openLog(Number(d?.first_lines?.[0]) || 1))
            .catch(() => openLog(1));
        }));
    }
  };

  const overview = (r: Run, s: Scope): HTMLElement => {
    const i = r.info;
    const tags = new Map(r.data.tags.map((t) => [t.key, t.value]));
    const noteKey = 'mlflow.note.content';
    const desc = h('div', { class: 'description' });
    const showDesc = () => {
      const text = tags.get(noteKey) ?? '';
      desc.replaceChildren(
        h('div', { class: 'desc-text' + (text ? '' : ' empty') }, text || 'No description.'),
        h(
          'button',
          {
            class: 'link',
            onclick: () => {
              const area = h('textarea', { rows: 5, 'aria-label': 'Description', value: text });
              const err = h('span', { class: 'error-text' });
              desc.replaceChildren(
                area,
                h('div', { class: 'row' },
                  h('button', { class: 'primary', onclick: async () => {
                    try {
                      await setTag(i.run_id, noteKey, area.value);
                      tags.set(noteKey, area.value);
                      showDesc();
                    } catch (e: any) {
                      err.textContent = e.message;
                    }
                  } }, 'Save'),
                  h('button', { onclick: showDesc }, 'Cancel'),
                  err,
                ),
              );
              area.focus();
            },
          },
          'Edit description',
        ),
      );
    };
    showDesc();
    const source = tags.get('mlflow.source.name') ?? '';
    const gitCommit = tags.get('mlflow.source.git.commit');
    const params = [...r.data.params].sort((a, b) => a.key.localeCompare(b.key));
    const latest = [...r.data.metrics].sort((a, b) => a.key.localeCompare(b.key));
    const visibleTags = [...tags].filter(([k]) => k !== noteKey).sort(([a], [b]) => a.localeCompare(b));
    // GPU-hours of every attempt of the run (docs/gpu.md); '—' when it held no GPU.
    const gpuHours = h('span', { 'data-testid': 'run-gpu-hours' }, '…');
    getGPUHours({ run_id: i.run_id })
      .then((g) => !s.disposed && (gpuHours.textContent = gpuHoursText(g, g.runs?.[0]?.attempts.length) || '—'))
      .catch(() => (gpuHours.textContent = '—'));
    // Goodput, MFU and throughput (docs/run.md); the breakdown on hover and below.
    const goodput = h('span', { 'data-testid': 'run-goodput' }, '…');
    getGoodput(i.run_id)
      .then((g) => {
        if (s.disposed) return;
        goodput.textContent = goodputText(g) || '—';
        const b = breakdownText(g.breakdown);
        if (b) goodput.append(h('div', { class: 'muted small', 'data-testid': 'run-goodput-breakdown' }, b));
        if (g.mfu.mfu == null && g.mfu.reason) goodput.title = 'MFU: ' + g.mfu.reason;
      })
      .catch(() => (goodput.textContent = '—'));
    return h(
      'div',
      { class: 'overview' },
      h(
        'div',
        { class: 'cols' },
        h(
          'section',
          null,
          h('h2', null, 'About this run'),
          kvTable(
            [
              ['Status', i.status],
              ['Started', fmtTime(i.start_time)],
              ['Ended', i.end_time ? fmtTime(i.end_time) : '—'],
              ['Duration', i.start_time ? fmtDuration((i.end_time || Date.now()) - i.start_time) : ''],
              ['GPU-hours', gpuHours],
              ['Goodput', goodput],
              ['User', i.user_id ?? ''],
              ['Source', source + (gitCommit ? ` @ ${gitCommit.slice(0, 10)}` : '')],
              ['Run ID', i.run_id],
              ['Artifacts', i.artifact_uri ?? ''],
            ],
            '',
          ),
          h('h2', null, 'Description'),
          desc,
        ),
        h('section', null, h('h2', null, `Parameters (${params.length})`), kvTable(params.map((x) => [x.key, x.value]), 'No parameters.')),
        h(
          'section',
          null,
          h('h2', null, `Metrics (${latest.length})`),
          kvTable(latest.map((m) => [m.key, `${fmtNumber(m.value)}  (step ${m.step})`]), 'No metrics.'),
        ),
      ),
      runModels(r, s, { files: false }),
      h('section', null, h('h2', null, `Tags (${visibleTags.length})`), kvTable(visibleTags, 'No tags.')),
      comments(i.run_id, s),
    );
  };

  const comments = (id: string, s: Scope): HTMLElement => {
    const list = h('div', { class: 'comments-list' }, spinner());
    const area = h('textarea', { rows: 3, placeholder: 'Add a comment…', 'aria-label': 'Comment' });
    const err = h('span', { class: 'error-text' });
    const load = async () => {
      try {
        const cs = await listComments('run', id);
        if (s.disposed) return;
        list.replaceChildren(
          ...(cs.length
            ? cs.map((c) =>
                h(
                  'div',
                  { class: 'comment' },
                  h('div', { class: 'comment-head' }, h('strong', null, c.author || 'someone'), ' ', h('span', { class: 'muted' }, fmtTime(c.created_time)),
                    !session.multiUser || c.author === session.user?.email ? h('button', { class: 'link', onclick: async () => { await deleteComment(c.id).catch((e) => (err.textContent = e.message)); void load(); } }, 'Delete') : null),
                  h('div', { class: 'comment-body' }, c.body),
                ),
              )
            : [h('p', { class: 'empty' }, 'No comments yet.')]),
        );
      } catch (e) {
        list.replaceChildren(errorBox(e));
      }
    };
    void load();
    return h(
      'section',
      { class: 'comments' },
      h('h2', null, 'Comments'),
      list,
      area,
      h('div', { class: 'row' }, h('button', { class: 'primary', onclick: async () => {
        if (!area.value.trim()) return;
        try {
          await addComment('run', id, area.value);
          area.value = '';
          void load();
        } catch (e: any) {
          err.textContent = e.message;
        }
      } }, 'Comment'), err),
    );
  };


  for (const t of TABS) tabBar.append(h('button', { role: 'tab', 'data-tab': t, 'aria-selected': String(t === tab), onclick: () => showTab(t) }, LABELS[t]));

  const load = async (first: boolean) => {
    try {
      const r = await getRun(runId);
      if (scope.disposed) return;
      const statusChanged = run && run.info.status !== r.info.status;
      run = r;
      renderHead(r);
      if (first) showTab(tab);
      // A run that ended: its overview, and its checkpoints (a save still
      // open is then cut off), as they stand now.
      else if (statusChanged && (tab === 'overview' || tab === 'checkpoints')) showTab(tab);
    } catch (e) {
      if (first) content.replaceChildren(errorBox(e));
    }
  };
  void load(true);
  scope.interval(() => {
    if (isLive() && document.visibilityState === 'visible') void load(false);
  }, config.runPollMs);
  return h('div', { class: 'page run' }, head, tabBar, content);
}

/**
 * systemBoard is a run's system metrics as charts: one per GPU field with a
 * line per GPU (sections per node for multi-node runs), one per other key.
 */
function systemBoard(r: Run, keys: string[]): BoardChart[] {
  const start = r.info.start_time;
  const charts = systemCharts(keys).map((c) => {
    const g = gpuKey(c.keys[0].key);
    const section = g ? (g.node ? 'GPUs · ' + g.node : 'GPUs') : 'System';
    return {
      id: c.id,
      title: c.title,
      section,
      make: () => ({ lines: c.keys.map((k, i) => ({ runId: r.info.run_id, key: k.key, name: k.label, color: colour(i), startTime: start })) }),
    };
  });
  const rank = (s: string) => (s === 'GPUs' ? 0 : s.startsWith('GPUs') ? 1 : 2);
  return charts.sort((a, b) => rank(a.section) - rank(b.section) || a.section.localeCompare(b.section, 'en', { numeric: true }));
}
