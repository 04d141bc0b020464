// Workspace paths in the UI: a folder's page address and the breadcrumb
// trail that leads from the workspace root to a folder or an experiment.

/** folderHref is the page of a workspace folder ("/" is the root). */
export function folderHref(path: string): string {
  return path === '/' ? '/' : '/workspace' + path.split('/').map(encodeURIComponent).join('/');
}

/** Crumb is one step of a breadcrumb: its label and where it leads. */
export interface Crumb {
  label: string;
  href: string;
}

/**
 * folderCrumbs is the trail from the workspace root to the folder that
 * holds name (an experiment's name, or a folder's path with folder set):
 * "Workspace", then each folder of a path name. A name that is not a path
 * (Default, names from before workspaces) lives at the root.
 */
export function folderCrumbs(name: string, folder = false): Crumb[] {
  const out: Crumb[] = [{ label: 'Workspace', href: '/' }];
  if (!name.startsWith('/')) return out;
  const parts = name.split('/').filter(Boolean);
  if (!folder) parts.pop();
  let acc = '';
  for (const p of parts) {
    acc += '/' + p;
    out.push({ label: p, href: folderHref(acc) });
  }
  return out;
}

/** childName is the last segment of a path. */
export function childName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}
