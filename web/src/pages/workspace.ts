// The workspace browser: folders (/Users/..., /Shared; created ones and
// those that exist because an experiment lies under them), the experiments
// and workspace files in them, search by name, new folder, new experiment,
// and the permissions dialog. The root also offers the most recently
// updated experiments and the latest runs.

import { createExperiment, Experiment, get, listFolders, mkdirs, Run, searchExperiments, searchRuns } from '../api';
import { debounce, errorBox, h, link, Scope, spinner } from '../dom';
import { fmtBytes, fmtTime } from '../lib/format';
import { childName, folderCrumbs, folderHref } from '../lib/wspath';
import { navigate } from '../router';
import { session } from '../session';
import { permissionsDialog } from './permissions';

interface FileItem {
  path: string;
  name: string;
  is_directory?: boolean;
  file_size?: number;
  last_modified?: number;
}

/** filesIn lists the workspace files and file folders of a folder (none at the root, or when the Files API refuses). */
async function filesIn(folder: string): Promise<FileItem[]> {
  if (folder === '/') return [];
  try {
    const r = await get('/api/2.0/fs/directories/Workspace' + folder.split('/').map(encodeURIComponent).join('/'));
    return r.contents ?? [];
  } catch {
    return [];
  }
}

/** recentBox shows the most recently updated experiments and the latest runs among them. */
function recentBox(all: Experiment[], scope: Scope): HTMLElement | null {
  if (all.length === 0) return null;
  const recent = all.slice().sort((a, b) => (b.last_update_time ?? b.creation_time ?? 0) - (a.last_update_time ?? a.creation_time ?? 0));
  const names = new Map(all.map((e) => [e.experiment_id, e.name]));
  const runs = h('ul', { class: 'recent-list', 'data-testid': 'recent-runs' }, h('li', { class: 'muted' }, 'Loading…'));
  void searchRuns(recent.slice(0, 50).map((e) => e.experiment_id), '', ['attributes.start_time DESC'], 8)
    .then((page) => {
      if (scope.disposed) return;
      runs.replaceChildren(
        ...(page.runs.length
          ? page.runs.map((r: Run) =>
              h(
                'li',
                null,
                link('/runs/' + encodeURIComponent(r.info.run_id), r.info.run_name || r.info.run_id),
                h('span', { class: 'status status-' + String(r.info.status).toLowerCase() }, r.info.status),
                h('span', { class: 'muted' }, ' ' + (names.get(r.info.experiment_id) ?? '') + ' · ' + fmtTime(r.info.start_time)),
              ),
            )
          : [h('li', { class: 'muted' }, 'No runs yet.')]),
      );
    })
    .catch(() => runs.replaceChildren());
  return h(
    'section',
    { class: 'recent', 'data-testid': 'recent' },
    h(
      'div',
      null,
      h('h2', null, 'Recent experiments'),
      h(
        'ul',
        { class: 'recent-list', 'data-testid': 'recent-experiments' },
        recent.slice(0, 8).map((e) => h('li', null, link('/experiments/' + encodeURIComponent(e.experiment_id), e.name), h('span', { class: 'muted' }, ' ' + fmtTime(e.last_update_time ?? e.creation_time)))),
      ),
    ),
    h('div', null, h('h2', null, 'Recent runs'), runs),
  );
}

/** likePattern escapes nothing (the grammar has no escapes): quotes become the one-character wildcard and callers filter exactly. */
function likeLiteral(s: string): string {
  return s.replace(/'/g, '_');
}

async function experimentsIn(folder: string): Promise<{ here: Experiment[]; all: Experiment[] }> {
  const filter = folder === '/' ? '' : `name LIKE '${likeLiteral(folder)}/%'`;
  const out: Experiment[] = [];
  let token: string | undefined;
  do {
    const page = await searchExperiments(filter, token);
    out.push(...page.experiments);
    token = page.next_page_token;
  } while (token && out.length < 20000);
  const here = out.filter((e) => {
    if (folder === '/') return !e.name.startsWith('/') || e.name.lastIndexOf('/') === 0;
    return e.name.startsWith(folder + '/') && !e.name.slice(folder.length + 1).includes('/');
  });
  return { here, all: out };
}

export function workspacePage(p: Record<string, string>, _q: URLSearchParams, scope: Scope): HTMLElement {
  const folder = p.rest ? '/' + p.rest.replace(/^\/+|\/+$/g, '') : '/';
  const list = h('div', { class: 'ws-list' }, spinner());
  const search = h('input', { type: 'search', class: 'search', placeholder: 'Search experiments by name…', 'aria-label': 'Search experiments' });
  const results = h('div', { class: 'ws-results' });

  const recent = h('div');
  const crumbs = h('nav', { class: 'crumbs', 'aria-label': 'Folder path', 'data-testid': 'folder-crumbs' });
  folderCrumbs(folder, true).forEach((c, i) => crumbs.append(...(i ? [h('span', { class: 'sep' }, '/')] : []), link(c.href, c.label)));

  const load = async () => {
    try {
      // A folder that holds only workspace files is not one the workspace
      // API knows (404): it is shown when the Files API lists something.
      let missing: unknown = null;
      const [folders, { here: exps, all }, files] = await Promise.all([
        listFolders(folder).catch((e): string[] | Promise<string[]> => (folder === '/' ? [] : e?.status === 404 ? ((missing = e), []) : Promise.reject(e))),
        experimentsIn(folder),
        filesIn(folder),
      ]);
      if (scope.disposed) return;
      if (missing && !exps.length && !files.length) throw missing;
      if (folder === '/') recent.replaceChildren(recentBox(all, scope) ?? '');
      // Folders that hold only workspace files are folders too.
      const known = new Set(folders);
      for (const f of files) {
        const p = (folder === '/' ? '' : folder) + '/' + f.name;
        if (f.is_directory && !known.has(p)) (known.add(p), folders.push(p));
      }
      folders.sort();
      const rows: HTMLElement[] = [];
      for (const f of folders) {
        const name = childName(f);
        rows.push(
          h(
            'tr',
            { class: 'folder-row' },
            h('td', null, h('span', { class: 'icon-folder' }, '▸ '), link(folderHref(f), name)),
            h('td', { class: 'muted' }, 'folder'),
            h('td'),
            h('td', null, session.multiUser ? h('button', { class: 'link', onclick: () => permissionsDialog('folder:' + f, f) }, 'Permissions') : null),
          ),
        );
      }
      for (const e of exps) {
        const name = e.name.startsWith(folder + '/') ? e.name.slice(folder.length + 1) : e.name;
        rows.push(
          h(
            'tr',
            { class: 'experiment-row', 'data-experiment-id': e.experiment_id },
            h('td', null, h('span', { class: 'icon-exp' }, '◆ '), link('/experiments/' + encodeURIComponent(e.experiment_id), name)),
            h('td', { class: 'muted' }, 'experiment'),
            h('td', { class: 'muted' }, fmtTime(e.last_update_time ?? e.creation_time)),
            h('td', null, session.multiUser ? h('button', { class: 'link', onclick: () => permissionsDialog('experiment:' + e.experiment_id, e.name) }, 'Permissions') : null),
          ),
        );
      }
      for (const f of files) {
        if (f.is_directory) continue;
        const p = folder + '/' + f.name;
        rows.push(
          h(
            'tr',
            { class: 'file-row' },
            h('td', null, h('span', { class: 'icon-file' }, '▫ '), h('a', { href: '/api/2.0/fs/files/Workspace' + p.split('/').map(encodeURIComponent).join('/'), download: f.name }, f.name)),
            h('td', { class: 'muted' }, 'file · ' + fmtBytes(f.file_size)),
            h('td', { class: 'muted' }, f.last_modified ? fmtTime(f.last_modified) : ''),
            h('td'),
          ),
        );
      }
      list.replaceChildren(
        rows.length
          ? h('table', { class: 'grid' }, h('thead', null, h('tr', null, h('th', null, 'Name'), h('th', null, 'Type'), h('th', null, 'Updated'), h('th'))), h('tbody', null, rows))
          : h('p', { class: 'empty' }, 'This folder is empty.'),
      );
    } catch (e) {
      list.replaceChildren(errorBox(e));
    }
  };

  const doSearch = debounce(async () => {
    const term = search.value.trim();
    if (!term) {
      results.replaceChildren();
      list.hidden = false;
      return;
    }
    list.hidden = true;
    try {
      const page = await searchExperiments(`name ILIKE '%${likeLiteral(term)}%'`, undefined, 200);
      results.replaceChildren(
        page.experiments.length
          ? h(
              'ul',
              { class: 'search-results' },
              page.experiments.map((e) => h('li', null, link('/experiments/' + encodeURIComponent(e.experiment_id), e.name))),
            )
          : h('p', { class: 'empty' }, 'No experiment matches.'),
      );
    } catch (e) {
      results.replaceChildren(errorBox(e));
    }
  }, 200);
  search.addEventListener('input', doSearch);

  const newName = h('input', { type: 'text', placeholder: 'name', 'aria-label': 'Name' });
  const formErr = h('span', { class: 'error-text' });
  const create = async (kind: 'folder' | 'experiment') => {
    formErr.textContent = '';
    const name = newName.value.trim();
    if (!name || name.includes('/')) {
      formErr.textContent = 'Give a name without "/".';
      return;
    }
    const path = (folder === '/' ? '' : folder) + '/' + name;
    try {
      if (kind === 'folder') {
        await mkdirs(path);
        navigate(folderHref(path));
      } else {
        const id = await createExperiment(folder === '/' && !session.multiUser ? name : path);
        navigate('/experiments/' + encodeURIComponent(id));
      }
    } catch (e: any) {
      formErr.textContent = e.message;
    }
  };

  void load();
  return h(
    'div',
    { class: 'page workspace' },
    h('div', { class: 'page-head' }, h('h1', null, folder === '/' ? 'Workspace' : folder.slice(folder.lastIndexOf('/') + 1)), crumbs),
    h(
      'div',
      { class: 'toolbar' },
      search,
      h('span', { class: 'spacer' }),
      newName,
      h('button', { onclick: () => create('folder') }, 'New folder'),
      h('button', { class: 'primary', onclick: () => create('experiment') }, 'New experiment'),
      session.multiUser && folder !== '/' ? h('button', { onclick: () => permissionsDialog('folder:' + folder, folder) }, 'Folder permissions') : null,
      formErr,
    ),
    recent,
    results,
    list,
  );
}
