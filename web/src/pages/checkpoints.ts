// The run's Checkpoints tab. VolumeWriter records each save as a
// checkpoint_save run event (and VolumeReader each load as a
// checkpoint_load), docs/volumes.md: a row per save gives its step, when
// it landed, size, ranks, mode and staging, how long training was
// blocked, the upload after that, and the outcome (complete, writing,
// incomplete when cut off, failed with the error). Saves an older client
// only tagged (sextant.checkpoint.step.<step>) are listed from their tags
// and read from their directories through the Files API: time, size,
// ranks (the distinct __<rank>_ prefixes of the .distcp shards) and
// whether they are complete (DCP writes .metadata last). Each links into
// the volume browser; the snippet loads or resumes from the newest
// complete one. Every value, the error text included, is set as text.
// While the run runs, the tab lists saves as they begin and land.

import { ApiError, get, request, Run, SX } from '../api';
import { config } from '../config';
import { h, link, Scope } from '../dom';
import { checkpointRows, CkptRow, fmtMs, RunEvent, stateText } from '../lib/checkpoints';
import { fmtBytes, fmtTime } from '../lib/format';

const enc = (p: string) => p.split('/').map(encodeURIComponent).join('/');

/** browserHref is the volume browser's page of a /Volumes/... path. */
function browserHref(path: string): string {
  return '/volumes/' + enc(path.replace(/^\/Volumes\//, ''));
}

interface Stat {
  state: 'complete' | 'incomplete' | 'missing' | 'error';
  size: number;
  time: number;
  ranks: number;
  message?: string;
}

/** stat reads a tagged checkpoint's directory. */
async function stat(path: string): Promise<Stat> {
  try {
    let size = 0;
    let time = 0;
    let meta = false;
    const ranks = new Set<string>();
    let token: string | undefined;
    do {
      const r = await get('/api/2.0/fs/directories' + enc(path), { page_token: token });
      for (const f of r.contents ?? []) {
        const name = String(f.name ?? String(f.path ?? '').split('/').pop());
        if (f.is_directory) continue;
        size += Number(f.file_size ?? 0);
        time = Math.max(time, Number(f.last_modified ?? 0));
        if (name === '.metadata') meta = true;
        const m = /^__(\d+)_/.exec(name);
        if (m && name.endsWith('.distcp')) ranks.add(m[1]);
      }
      token = r.next_page_token;
    } while (token);
    return { state: meta ? 'complete' : 'incomplete', size, time, ranks: ranks.size };
  } catch (e: any) {
    return { state: e?.status === 404 ? 'missing' : 'error', size: 0, time: 0, ranks: 0, message: e?.message };
  }
}

/** stillThere says whether a save recorded complete still has its .metadata (ckpt gc may have deleted it); true when it cannot tell. */
async function stillThere(path: string): Promise<boolean> {
  try {
    await request('HEAD', '/api/2.0/fs/files' + enc(path + '/.metadata'), { raw: true });
    return true;
  } catch (e) {
    return !(e instanceof ApiError && e.status === 404);
  }
}

/** runCheckpointEvents reads the run's checkpoint events, every page. */
async function runCheckpointEvents(runId: string): Promise<RunEvent[]> {
  const out: RunEvent[] = [];
  let after = 0;
  for (let i = 0; i < 100; i++) {
    const p = await get(SX + '/events/list', { run_id: runId, kind: 'checkpoint_save,checkpoint_load', after_seq: after || undefined, limit: 10_000 });
    out.push(...(p.events ?? []));
    if (!p.next_seq) break;
    after = p.next_seq;
  }
  return out;
}

const COLUMNS = ['Step', 'Path', 'Saved', 'Size', 'Ranks', 'Mode', 'Blocked', 'Upload', 'State', ''];
const TITLES: Record<string, string> = {
  Saved: 'When the save landed (or began, if it did not land)',
  Mode: 'sync, thread or process; then the staging of an async save (copy, shared, pinned)',
  Blocked: 'How long training was blocked: the staging copy of an async save, the whole of a synchronous one',
  Upload: 'The upload after training went on: landed − began − blocked (async saves)',
};

/** stateCell fills a row's State cell: the outcome, and a failed save's error as text. */
function stateCell(td: HTMLTableCellElement, r: CkptRow): void {
  td.className = 'ckpt-' + r.state;
  if (r.state === 'failed' && r.error) {
    const shown = r.error.length > 400 ? r.error.slice(0, 400) + '…' : r.error;
    td.replaceChildren('failed: ', h('span', { class: 'ckpt-err-text', title: r.error }, shown));
  } else td.textContent = stateText(r);
  if (r.state === 'deleted') td.title = 'Recorded complete; its .metadata is no longer on the volume (deleted since, e.g. by sextant ckpt gc).';
  if (r.state === 'incomplete' && r.source === 'event') td.title = 'The save did not finish: cut off when the job ended or was killed.';
}

export function checkpointsView(run: Run, scope: Scope): HTMLElement {
  const body = h('div', null, h('p', { class: 'muted' }, 'Loading checkpoints…'));
  const el = h('section', { class: 'checkpoints' }, h('h2', null, 'Checkpoints'), body);
  // The events as last shown: a running job's tab reads them again every
  // runPollMs and shows them anew when they changed (a save began, landed
  // or failed), each time in a scope of its own so that the last showing's
  // directory reads stop.
  let shown: string | undefined;
  let showing = new Scope();
  scope.add(() => showing.dispose());
  let busy = false;
  const load = async () => {
    if (busy) return;
    busy = true;
    try {
      const events = await runCheckpointEvents(run.info.run_id).catch(() => [] as RunEvent[]); // a server without run events: the tags alone
      const sig = JSON.stringify(events);
      if (scope.disposed || sig === shown) return;
      shown = sig;
      showing.dispose();
      showing = new Scope();
      const { rows, loads } = checkpointRows(events, run.data.tags, run.info.status);
      el.firstElementChild!.textContent = rows.length ? `Checkpoints (${rows.length})` : 'Checkpoints';
      body.replaceChildren(...render(run, rows, loads, showing));
    } finally {
      busy = false;
    }
  };
  void load();
  if (run.info.status === 'RUNNING') {
    scope.interval(() => {
      if (document.visibilityState === 'visible') void load();
    }, config.runPollMs);
  }
  return el;
}

function render(run: Run, list: CkptRow[], loads: CkptRow[], scope: Scope): Node[] {
  if (list.length === 0 && loads.length === 0) {
    return [
      h('p', { class: 'empty' }, 'No checkpoints recorded for this run. sextant.checkpoint.VolumeWriter records each save to a volume on the run it runs in (a checkpoint_save event); VolumeReader each load.'),
    ];
  }
  const snippet = h('pre', { class: 'art-text snippet', 'data-testid': 'ckpt-snippet' });
  const showSnippet = (path: string) => {
    snippet.textContent = [
      'import torch.distributed.checkpoint as dcp',
      'from sextant.checkpoint import VolumeReader',
      '',
      `dcp.load(state_dict, storage_reader=VolumeReader(${JSON.stringify(path)}))`,
      '',
      '# or resume this run from it, or from its newest complete checkpoint:',
      `#   sextant run --run-id ${run.info.run_id} --resume ${JSON.stringify(path)} -- python train.py`,
      `#   sextant run --run-id ${run.info.run_id} --resume latest -- python train.py`,
      `#   path = sextant.checkpoint.latest_complete(${JSON.stringify(path.replace(/\/[^/]*$/, ''))})`,
    ].join('\n');
  };
  const rows = list.map((c) => {
    const cells = {
      time: h('td', { class: 'nowrap' }),
      size: h('td', { class: 'num' }),
      ranks: h('td', { class: 'num' }),
      state: h('td', { class: 'muted' }, '…'),
      upload: h('td', { class: 'num' }),
      load: h('td'),
    };
    const tr = h(
      'tr',
      { 'data-step': String(c.step), 'data-source': c.source },
      h('td', { class: 'num' }, Number.isFinite(c.step) ? c.step.toLocaleString() : '—', c.latest ? h('span', { class: 'chip' }, 'latest') : null),
      h('td', null, link(browserHref(c.path), c.path)),
      cells.time,
      cells.size,
      cells.ranks,
      h('td', { class: 'nowrap' }, c.mode ?? ''),
      h('td', { class: 'num' }, fmtMs(c.blockedMs)),
      cells.upload,
      cells.state,
      cells.load,
    );
    const fill = () => {
      cells.time.textContent = fmtTime(c.landed || c.started);
      cells.time.title = c.started ? 'began ' + fmtTime(c.started) + (c.landed ? ', landed ' + fmtTime(c.landed) : '') : '';
      cells.size.textContent = c.bytes ? fmtBytes(c.bytes) : '';
      if (c.files) cells.size.title = `${c.files} files`;
      cells.ranks.textContent = c.ranks ? String(c.ranks) : '';
      stateCell(cells.state, c);
      tr.dataset.state = c.state;
      // A save cut off has no upload time; only one complete (and still
      // there) can be loaded.
      const ok = c.state === 'complete';
      cells.upload.textContent = c.state === 'incomplete' || c.state === 'writing' ? '' : fmtMs(c.uploadMs);
      cells.load.replaceChildren(ok ? h('button', { class: 'link', onclick: () => showSnippet(c.path) }, 'Load…') : '');
    };
    if (c.source === 'event') fill();
    return { c, tr, fill };
  });
  // Tagged saves: read their directories; saves recorded complete: check
  // that their .metadata is still there. At most 4 requests at a time,
  // newest first; the snippet then loads the newest complete one.
  let next = 0;
  const work = async () => {
    while (next < rows.length && !scope.disposed) {
      const r = rows[next++];
      if (r.c.source === 'tag') {
        const s = await stat(r.c.path);
        if (scope.disposed) return;
        r.c.state = s.state;
        if (s.state === 'error') r.c.error = s.message;
        if (s.state === 'complete' || s.state === 'incomplete') {
          r.c.landed = s.time;
          r.c.bytes = s.size;
          r.c.ranks = s.ranks;
        }
        r.fill();
      } else if (r.c.state === 'complete') {
        if (!(await stillThere(r.c.path)) && !scope.disposed) {
          r.c.state = 'deleted';
          r.fill();
        }
      }
    }
  };
  void Promise.all([work(), work(), work(), work()]).then(() => {
    if (scope.disposed) return;
    const best = rows.find((r) => r.c.state === 'complete');
    if (best) showSnippet(best.c.path);
    else snippet.textContent = 'No complete checkpoint: every save listed failed, was cut off, or is missing its .metadata.';
    snippet.dataset.ready = 'true';
  });
  const out: Node[] = [];
  if (rows.length) {
    out.push(
      h(
        'div',
        { class: 'scroll-x' },
        h(
          'table',
          { class: 'grid ckpt-table', 'data-testid': 'checkpoints' },
          h('thead', null, h('tr', null, COLUMNS.map((x) => h('th', { title: TITLES[x] ?? null }, x)))),
          h('tbody', null, rows.map((r) => r.tr)),
        ),
      ),
      h('h3', null, 'Load or resume'),
      snippet,
    );
  }
  if (loads.length) {
    out.push(
      h('h3', null, `Loads (${loads.length})`),
      h(
        'div',
        { class: 'scroll-x' },
        h(
          'table',
          { class: 'grid ckpt-table', 'data-testid': 'checkpoint-loads' },
          h('thead', null, h('tr', null, ['Loaded', 'Step', 'Path', 'Size', 'Ranks', 'Took', 'State'].map((x) => h('th', null, x)))),
          h(
            'tbody',
            null,
            loads.map((l) => {
              const st = h('td');
              stateCell(st, l);
              return h(
                'tr',
                { 'data-step': String(l.step), 'data-state': l.state },
                h('td', { class: 'nowrap' }, fmtTime(l.started)),
                h('td', { class: 'num' }, Number.isFinite(l.step) ? l.step.toLocaleString() : '—'),
                h('td', null, link(browserHref(l.path), l.path)),
                h('td', { class: 'num' }, l.bytes ? fmtBytes(l.bytes) : ''),
                h('td', { class: 'num' }, l.ranks ? String(l.ranks) : ''),
                h('td', { class: 'num' }, fmtMs(l.tookMs)),
                st,
              );
            }),
          ),
        ),
      ),
    );
  }
  return out;
}
