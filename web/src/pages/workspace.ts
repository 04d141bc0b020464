// The workspace browser: folders (/Users/..., /Shared) and the
// experiments in them, search by name, new folder, new experiment, and the
// permissions dialog.

import { createExperiment, Experiment, listFolders, mkdirs, searchExperiments } from '../api';
import { debounce, errorBox, h, link, Scope, spinner } from '../dom';
import { fmtTime } from '../lib/format';
import { navigate } from '../router';
import { session } from '../session';
import { permissionsDialog } from './permissions';

function folderHref(path: string): string {
  return path === '/' ? '/' : '/workspace' + path.split('/').map(encodeURIComponent).join('/');
}

/** likePattern escapes nothing (the grammar has no escapes): quotes become the one-character wildcard and callers filter exactly. */
function likeLiteral(s: string): string {
  return s.replace(/'/g, '_');
}

async function experimentsIn(folder: string): Promise<Experiment[]> {
  const filter = folder === '/' ? '' : `name LIKE '${likeLiteral(folder)}/%'`;
  const out: Experiment[] = [];
  let token: string | undefined;
  do {
    const page = await searchExperiments(filter, token);
    out.push(...page.experiments);
    token = page.next_page_token;
  } while (token && out.length < 20000);
  return out.filter((e) => {
    if (folder === '/') return !e.name.startsWith('/') || e.name.lastIndexOf('/') === 0;
    return e.name.startsWith(folder + '/') && !e.name.slice(folder.length + 1).includes('/');
  });
}

export function workspacePage(p: Record<string, string>, _q: URLSearchParams, scope: Scope): HTMLElement {
  const folder = p.rest ? '/' + p.rest.replace(/^\/+|\/+$/g, '') : '/';
  const list = h('div', { class: 'ws-list' }, spinner());
  const search = h('input', { type: 'search', class: 'search', placeholder: 'Search experiments by name…', 'aria-label': 'Search experiments' });
  const results = h('div', { class: 'ws-results' });

  const crumbs = h('nav', { class: 'crumbs', 'aria-label': 'Folder path' }, link('/', 'Workspace'));
  let acc = '';
  for (const part of folder.split('/').filter(Boolean)) {
    acc += '/' + part;
    crumbs.append(h('span', { class: 'sep' }, '/'), link(folderHref(acc), part));
  }

  const load = async () => {
    try {
      const [folders, exps] = await Promise.all([listFolders(folder).catch((e) => (folder === '/' ? [] : Promise.reject(e))), experimentsIn(folder)]);
      if (scope.disposed) return;
      const rows: HTMLElement[] = [];
      for (const f of folders) {
        const name = f.slice(f.lastIndexOf('/') + 1);
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
    results,
    list,
  );
}
