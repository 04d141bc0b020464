// The run's Checkpoints tab. VolumeWriter tags the run with each save
// (sextant.checkpoint.step.<step> = the checkpoint's volume path, and
// sextant.checkpoint.latest / latest_step); each checkpoint's directory,
// read through the Files API, gives its time, size, ranks (the distinct
// __<rank>_ prefixes of its .distcp shards) and whether it is complete
// (DCP writes .metadata last). Each links into the volume browser; the
// snippet loads or resumes from the newest complete one.

import { get, Run } from '../api';
import { h, link, Scope } from '../dom';
import { fmtBytes, fmtTime } from '../lib/format';

interface Ckpt {
  step: number;
  path: string;
}

/** checkpointsOf reads a run's checkpoint tags, newest step first. */
export function checkpointsOf(run: Run): { list: Ckpt[]; latest?: string } {
  const list: Ckpt[] = [];
  let latest: string | undefined;
  for (const t of run.data.tags) {
    const m = /^sextant\.checkpoint\.step\.(\d+)$/.exec(t.key);
    if (m) list.push({ step: Number(m[1]), path: t.value });
    else if (t.key === 'sextant.checkpoint.latest') latest = t.value;
  }
  list.sort((a, b) => b.step - a.step);
  if (latest && !list.some((c) => c.path === latest)) list.unshift({ step: NaN, path: latest });
  return { list, latest };
}

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

export function checkpointsView(run: Run, scope: Scope): HTMLElement {
  const { list, latest } = checkpointsOf(run);
  if (list.length === 0) {
    return h(
      'section',
      { class: 'checkpoints' },
      h('h2', null, 'Checkpoints'),
      h('p', { class: 'empty' }, 'No checkpoints recorded for this run. sextant.checkpoint.VolumeWriter tags the active run with each save to a volume (sextant.checkpoint.step.<step>).'),
    );
  }
  const snippet = h('pre', { class: 'art-text snippet', 'data-testid': 'ckpt-snippet' });
  const showSnippet = (path: string) => {
    snippet.textContent = [
      'import torch.distributed.checkpoint as dcp',
      'from sextant.checkpoint import VolumeReader',
      '',
      `dcp.load(state_dict, storage_reader=VolumeReader(${JSON.stringify(path)}))`,
      '',
      '# or resume this run from its newest complete checkpoint:',
      `#   sextant run --resume ${run.info.run_id} -- python train.py`,
      `#   path = sextant.checkpoint.latest_complete(${JSON.stringify(path.replace(/\/[^/]*$/, ''))})`,
    ].join('\n');
  };
  // The newest complete checkpoint (rows are newest first; listings end in any order).
  let best = Infinity;
  const rows = list.map((c) => {
    const cells = { state: h('td', { class: 'muted' }, '…'), time: h('td'), size: h('td', { class: 'num' }), ranks: h('td', { class: 'num' }) };
    const tr = h(
      'tr',
      { 'data-step': String(c.step) },
      h('td', { class: 'num' }, Number.isFinite(c.step) ? c.step.toLocaleString() : '—', c.path === latest ? h('span', { class: 'chip' }, 'latest') : null),
      h('td', null, link(browserHref(c.path), c.path)),
      cells.time,
      cells.size,
      cells.ranks,
      cells.state,
      h('td', null, h('button', { class: 'link', onclick: () => showSnippet(c.path) }, 'Load…')),
    );
    return { c, tr, cells };
  });
  // At most 4 directory listings at a time, newest first.
  let next = 0;
  const work = async () => {
    while (next < rows.length && !scope.disposed) {
      const r = rows[next++];
      const s = await stat(r.c.path);
      if (scope.disposed) return;
      r.cells.state.textContent = s.state === 'error' ? 'error: ' + (s.message ?? '') : s.state;
      r.cells.state.className = 'ckpt-' + s.state;
      r.tr.dataset.state = s.state;
      if (s.state === 'complete' || s.state === 'incomplete') {
        r.cells.time.textContent = fmtTime(s.time);
        r.cells.size.textContent = fmtBytes(s.size);
        r.cells.ranks.textContent = String(s.ranks);
      }
      const at = rows.indexOf(r);
      if (s.state === 'complete' && at < best) {
        best = at;
        showSnippet(r.c.path);
      }
    }
  };
  void Promise.all([work(), work(), work(), work()]).then(() => {
    if (best === Infinity) snippet.textContent = 'No complete checkpoint: every save listed is missing its .metadata.';
    snippet.dataset.ready = 'true';
  });
  return h(
    'section',
    { class: 'checkpoints' },
    h('h2', null, `Checkpoints (${list.length})`),
    h(
      'div',
      { class: 'scroll-x' },
      h(
        'table',
        { class: 'grid', 'data-testid': 'checkpoints' },
        h('thead', null, h('tr', null, ['Step', 'Path', 'Saved', 'Size', 'Ranks', 'State', ''].map((x) => h('th', null, x)))),
        h('tbody', null, rows.map((r) => r.tr)),
      ),
    ),
    h('h3', null, 'Load or resume'),
    snippet,
  );
}
