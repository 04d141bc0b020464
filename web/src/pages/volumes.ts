// The volumes browser: catalogs, schemas, volumes and their files, with
// upload and download, over the Unity Catalog volume routes and the Files
// API (/api/2.0/fs/directories/<path>, /api/2.0/fs/files/<path>). The
// same file browser serves workspace files (/Workspace/...). When the
// volume routes are missing (404), it says volumes are not available on
// this server and still offers the workspace files.

import { ApiError, get, request } from '../api';
import { errorBox, h, link, Scope, spinner } from '../dom';
import { fmtBytes, fmtTime } from '../lib/format';
import { navigate } from '../router';

const UC = '/api/2.1/unity-catalog';

function enc(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}

function href(parts: string[]): string {
  return '/volumes' + (parts.length ? '/' + parts.map(encodeURIComponent).join('/') : '');
}

export function volumesPage(p: Record<string, string>, _q: URLSearchParams, scope: Scope): HTMLElement {
  const parts = (p.rest ?? '').split('/').filter(Boolean).map(decodeURIComponent);
  const body = h('div', null, spinner());
  const crumbs = h('nav', { class: 'crumbs' }, link('/volumes', 'Volumes'));
  parts.forEach((part, i) => crumbs.append(h('span', { class: 'sep' }, '/'), link(href(parts.slice(0, i + 1)), part)));
  document.title = 'Volumes · Sextant';
  const page = h('div', { class: 'page volumes' }, h('div', { class: 'page-head' }, h('h1', null, 'Volumes'), crumbs), body);

  const listing = (items: { name: string; to: string; note?: string }[], empty: string) =>
    items.length
      ? h('table', { class: 'grid' }, h('tbody', null, items.map((it) => h('tr', null, h('td', null, link(it.to, it.name)), h('td', { class: 'muted' }, it.note ?? '')))))
      : h('p', { class: 'empty' }, empty);

  void (async () => {
    try {
      if (parts[0] === 'Workspace') {
        body.replaceChildren(fileBrowser('/' + parts.join('/'), parts.length <= 1, scope));
        return;
      }
      if (parts.length === 0) {
        const r = await get(UC + '/catalogs');
        body.replaceChildren(
          listing((r.catalogs ?? []).map((c: any) => ({ name: c.name, to: href([c.name]), note: c.comment })), 'No catalogs.'),
          h('h2', null, 'Workspace files'),
          link('/volumes/Workspace/Shared', '/Workspace/Shared'),
        );
      } else if (parts.length === 1) {
        const r = await get(UC + '/schemas', { catalog_name: parts[0] });
        body.replaceChildren(listing((r.schemas ?? []).map((s: any) => ({ name: s.name, to: href([parts[0], s.name]), note: s.comment })), 'No schemas in this catalog.'));
      } else if (parts.length === 2) {
        const r = await get(UC + '/volumes', { catalog_name: parts[0], schema_name: parts[1] });
        body.replaceChildren(listing((r.volumes ?? []).map((v: any) => ({ name: v.name, to: href([...parts, v.name]), note: v.volume_type })), 'No volumes in this schema.'));
      } else {
        body.replaceChildren(fileBrowser('/Volumes/' + parts.join('/'), false, scope));
      }
    } catch (e) {
      if (e instanceof ApiError && e.status === 404 && parts[0] !== 'Workspace') {
        body.replaceChildren(
          h(
            'div',
            { class: 'notice', 'data-testid': 'volumes-unavailable' },
            h('h2', null, 'Volumes are not available on this server'),
            h('p', null, 'This Sextant server has no volume routes yet. Workspace files are served by the same Files API:'),
            link('/volumes/Workspace/Shared', 'Browse /Workspace/Shared'),
          ),
        );
      } else body.replaceChildren(errorBox(e));
    }
  })();
  return page;
}

/** fileBrowser lists a Files API directory, with upload, download and new folder. */
function fileBrowser(dir: string, root: boolean, scope: Scope): HTMLElement {
  const list = h('div', null, spinner());
  const err = h('span', { class: 'error-text' });
  const file = h('input', { type: 'file', multiple: true, 'aria-label': 'Upload files' });
  const folderName = h('input', { type: 'text', placeholder: 'folder name', 'aria-label': 'Folder name' });
  const route = (path: string) => '/volumes' + enc(path.replace(/^\/Volumes/, ''));

  const load = async () => {
    try {
      const r = await get('/api/2.0/fs/directories' + enc(dir));
      if (scope.disposed) return;
      const items: any[] = r.contents ?? [];
      items.sort((a, b) => Number(!!b.is_directory) - Number(!!a.is_directory) || String(a.name ?? a.path).localeCompare(String(b.name ?? b.path)));
      list.replaceChildren(
        items.length
          ? h(
              'table',
              { class: 'grid files' },
              h('thead', null, h('tr', null, h('th', null, 'Name'), h('th', null, 'Size'), h('th', null, 'Modified'), h('th'))),
              h(
                'tbody',
                null,
                items.map((it) => {
                  const name = it.name ?? String(it.path).slice(String(it.path).lastIndexOf('/') + 1);
                  const path = it.path as string;
                  return h(
                    'tr',
                    null,
                    h('td', null, it.is_directory ? link(route(path), '▸ ' + name) : name),
                    h('td', { class: 'muted' }, it.is_directory ? '' : fmtBytes(it.file_size)),
                    h('td', { class: 'muted' }, fmtTime(it.last_modified)),
                    h('td', null, it.is_directory ? null : h('a', { href: '/api/2.0/fs/files' + enc(path), download: name }, 'Download')),
                  );
                }),
              ),
            )
          : h('p', { class: 'empty' }, 'This folder is empty.'),
      );
    } catch (e) {
      list.replaceChildren(errorBox(e));
    }
  };
  file.addEventListener('change', async () => {
    err.textContent = '';
    for (const f of Array.from(file.files ?? [])) {
      try {
        await request('PUT', '/api/2.0/fs/files' + enc(dir + '/' + f.name), { body: f, query: { overwrite: 'true' } });
      } catch (e: any) {
        err.textContent = `${f.name}: ${e.message}`;
      }
    }
    file.value = '';
    void load();
  });
  const mkdir = async () => {
    const n = folderName.value.trim();
    if (!n || n.includes('/')) return;
    try {
      await request('PUT', '/api/2.0/fs/directories' + enc(dir + '/' + n));
      navigate(route(dir + '/' + n));
    } catch (e: any) {
      err.textContent = e.message;
    }
  };
  void load();
  void root;
  return h(
    'div',
    { class: 'file-browser' },
    h('div', { class: 'toolbar' }, h('code', null, dir), h('span', { class: 'spacer' }), h('label', { class: 'button' }, 'Upload… ', file), folderName, h('button', { onclick: mkdir }, 'New folder'), err),
    list,
  );
}
