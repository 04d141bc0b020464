// Client-side routing over the History API. The server answers every
// non-API path with index.html, so any URL the router makes can be
// reloaded or shared.

import { Scope } from './dom';
import { mlflowHashRoute } from './lib/mlflowurl';

export type PageFn = (params: Record<string, string>, query: URLSearchParams, scope: Scope) => HTMLElement;

interface Route {
  re: RegExp;
  keys: string[];
  fn: PageFn;
}

const routes: Route[] = [];
let current: Scope | null = null;
let outlet: HTMLElement;
let notFound: PageFn = () => document.createElement('div');
let onNavigate: (path: string) => void = () => {};

/** route registers a page for a pattern such as /runs/:id or /workspace/*. */
export function route(pattern: string, fn: PageFn): void {
  const keys: string[] = [];
  const re = new RegExp(
    '^' +
      pattern
        .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
        .replace(/:([A-Za-z_]+)/g, (_, k) => {
          keys.push(k);
          return '([^/]+)';
        })
        .replace(/\*$/, () => {
          keys.push('rest');
          return '(.*)';
        }) +
      '/?$',
  );
  routes.push({ re, keys, fn });
}

export function start(el: HTMLElement, fallback: PageFn, navigated: (path: string) => void): void {
  outlet = el;
  notFound = fallback;
  onNavigate = navigated;
  window.addEventListener('popstate', () => render());
  document.addEventListener('click', (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const a = (e.target as Element).closest?.('a');
    if (!a || a.target || a.hasAttribute('download')) return;
    const url = new URL(a.href, location.href);
    if (url.origin !== location.origin || url.pathname.startsWith('/api/') || url.pathname.startsWith('/ajax-api/')) return;
    e.preventDefault();
    navigate(url.pathname + url.search + url.hash);
  });
  render();
}

/** navigate goes to href inside the app. */
export function navigate(href: string, replace = false): void {
  if (replace) history.replaceState(null, '', href);
  else history.pushState(null, '', href);
  render();
}

/** setQuery updates the query string without rendering the page again. */
export function setQuery(update: Record<string, string | null>): void {
  const url = new URL(location.href);
  for (const [k, v] of Object.entries(update)) {
    if (v == null || v === '') url.searchParams.delete(k);
    else url.searchParams.set(k, v);
  }
  history.replaceState(null, '', url.pathname + url.search + url.hash);
}

/** render shows the page for the current URL. */
export function render(): void {
  if (!outlet) return; // not started yet: start() renders
  // A link in MLflow's form (/#/experiments/1/runs/<id>), as the mlflow
  // client prints them: go to the Sextant page it names instead.
  const mlflow = mlflowHashRoute(location.hash);
  if (mlflow) history.replaceState(null, '', mlflow);
  current?.dispose();
  const scope = new Scope();
  current = scope;
  const path = location.pathname;
  const query = new URLSearchParams(location.search);
  let el: HTMLElement | null = null;
  for (const r of routes) {
    const m = r.re.exec(path);
    if (!m) continue;
    const params: Record<string, string> = {};
    r.keys.forEach((k, i) => (params[k] = decodeURIComponent(m[i + 1] ?? '')));
    el = r.fn(params, query, scope);
    break;
  }
  if (!el) el = notFound({}, query, scope);
  outlet.replaceChildren(el);
  onNavigate(path);
  window.scrollTo(0, 0);
}
