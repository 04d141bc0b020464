// The artifacts browser: a tree of a run's artifacts (artifacts/list), or
// of a logged model's (the artifact proxy's listing), and
// a preview of the selected file: text, JSON (pretty-printed), YAML and
// other text as text, images as images, anything else as a download link.
// Files are fetched through the artifact proxy with the session cookie.

import { ArtifactSource, FileInfo, request } from '../api';
import { errorBox, h, Scope } from '../dom';
import { fmtBytes } from '../lib/format';

const PREVIEW_BYTES = 512 * 1024;
const IMAGE = /\.(png|jpe?g|gif|webp|bmp|avif)$/i;
const TEXT = /\.(txt|log|json|jsonl|ya?ml|md|py|cfg|ini|toml|csv|tsv|sh|xml|html?|js|ts|mlmodel|MLmodel|requirements|conda|pip|lock)$|(^|\/)(MLmodel|requirements\.txt|conda\.yaml|python_env\.yaml|[^./]+)$/i;

export function artifactsView(src: ArtifactSource, scope: Scope, empty = 'No artifacts.'): HTMLElement {
  const tree = h('div', { class: 'art-tree', role: 'tree' });
  const preview = h('div', { class: 'art-preview' }, h('p', { class: 'empty' }, 'Select a file to preview it.'));
  let objectURL = '';
  scope.add(() => objectURL && URL.revokeObjectURL(objectURL));

  const node = (f: FileInfo): HTMLElement => {
    const name = f.path.slice(f.path.lastIndexOf('/') + 1);
    if (f.is_dir) {
      const kids = h('div', { class: 'art-kids', hidden: true });
      let loaded = false;
      const btn = h('button', { class: 'art-item dir', 'aria-expanded': 'false', 'data-path': f.path }, '▸ ' + name);
      btn.addEventListener('click', async () => {
        const open = kids.hidden;
        kids.hidden = !open;
        btn.setAttribute('aria-expanded', String(open));
        btn.textContent = (open ? '▾ ' : '▸ ') + name;
        if (open && !loaded) {
          loaded = true;
          await fill(kids, f.path);
        }
      });
      return h('div', { role: 'treeitem' }, btn, kids);
    }
    const btn = h('button', { class: 'art-item file', 'data-path': f.path }, name, h('span', { class: 'muted size' }, fmtBytes(f.file_size)));
    btn.addEventListener('click', () => {
      tree.querySelectorAll('.art-item.selected').forEach((e) => e.classList.remove('selected'));
      btn.classList.add('selected');
      void show(f);
    });
    return h('div', { role: 'treeitem' }, btn);
  };

  const fill = async (el: HTMLElement, path: string) => {
    el.replaceChildren(h('span', { class: 'muted' }, 'Loading…'));
    try {
      const files = await src.list(path);
      files.sort((a, b) => Number(b.is_dir) - Number(a.is_dir) || a.path.localeCompare(b.path));
      el.replaceChildren(...(files.length ? files.map(node) : [h('span', { class: 'muted' }, path ? 'empty folder' : empty)]));
    } catch (e) {
      el.replaceChildren(errorBox(e));
    }
  };

  const show = async (f: FileInfo) => {
    const url = src.url(f.path);
    const head = h(
      'div',
      { class: 'art-head' },
      h('strong', null, f.path),
      ' ',
      h('span', { class: 'muted' }, fmtBytes(f.file_size)),
      ' ',
      url ? h('a', { href: url, download: f.path.slice(f.path.lastIndexOf('/') + 1), class: 'button' }, 'Download') : h('span', { class: 'muted' }, '(stored outside this server)'),
    );
    if (!url) {
      preview.replaceChildren(head);
      return;
    }
    preview.replaceChildren(head, h('span', { class: 'muted' }, 'Loading…'));
    try {
      if (IMAGE.test(f.path)) {
        const res: Response = await request('GET', url, { raw: true });
        const blob = await res.blob();
        if (objectURL) URL.revokeObjectURL(objectURL);
        objectURL = URL.createObjectURL(new Blob([blob], { type: mimeOf(f.path) }));
        preview.replaceChildren(head, h('img', { src: objectURL, alt: f.path, class: 'art-img' }));
        return;
      }
      const big = (f.file_size ?? 0) > PREVIEW_BYTES;
      if (!TEXT.test(f.path) && (f.file_size ?? 0) > 0 && !(await looksLikeText(url))) {
        preview.replaceChildren(head, h('p', { class: 'empty' }, 'No preview for this file type.'));
        return;
      }
      const res: Response = await request('GET', url, { raw: true, headers: big ? { Range: `bytes=0-${PREVIEW_BYTES - 1}` } : {} });
      let text = await res.text();
      let kind = 'text';
      if (/\.json$/i.test(f.path) && !big) {
        try {
          text = JSON.stringify(JSON.parse(text), null, 2);
          kind = 'json';
        } catch {
          /* show as is */
        }
      } else if (/\.ya?ml$|MLmodel$/i.test(f.path)) kind = 'yaml';
      preview.replaceChildren(head, h('p', { class: 'muted', hidden: !big }, `Showing the first ${fmtBytes(PREVIEW_BYTES)}.`), h('pre', { class: 'art-text', 'data-kind': kind }, text));
    } catch (e) {
      preview.replaceChildren(head, errorBox(e));
    }
  };

  void fill(tree, '');
  return h('div', { class: 'artifacts' }, tree, preview);
}

async function looksLikeText(url: string): Promise<boolean> {
  try {
    const res: Response = await request('GET', url, { raw: true, headers: { Range: 'bytes=0-1023' } });
    const b = new Uint8Array(await res.arrayBuffer());
    return !b.includes(0);
  } catch {
    return false;
  }
}

function mimeOf(p: string): string {
  const ext = p.slice(p.lastIndexOf('.') + 1).toLowerCase();
  return ext === 'jpg' ? 'image/jpeg' : 'image/' + ext;
}
