// The model registry: the registered models, one model with its versions
// and aliases, and one version with the run that produced it. MLflow's
// links to #/models/... land here.

import { getModelVersion, getRegisteredModel, getRun, modelVersions, RegisteredModel, searchRegisteredModels } from '../api';
import { errorBox, h, link, Scope, spinner } from '../dom';
import { fmtTime } from '../lib/format';

const modelHref = (name: string) => '/models/' + encodeURIComponent(name);
const versionHref = (name: string, v: string) => modelHref(name) + '/versions/' + encodeURIComponent(v);

function crumbs(...parts: (HTMLElement | string)[]): HTMLElement {
  const nav = h('nav', { class: 'crumbs', 'aria-label': 'Model' }, link('/models', 'Models'));
  for (const p of parts) nav.append(h('span', { class: 'sep' }, '/'), p);
  return nav;
}

function table(head: string[], rows: (string | Node)[][], empty: string): HTMLElement {
  if (rows.length === 0) return h('p', { class: 'empty' }, empty);
  return h(
    'table',
    { class: 'grid' },
    h('thead', null, h('tr', null, head.map((c) => h('th', null, c)))),
    h('tbody', null, rows.map((r) => h('tr', null, r.map((c) => h('td', null, c))))),
  );
}

/** load runs fn and puts what it returns, or its error, in body. */
function load(body: HTMLElement, scope: Scope, fn: () => Promise<Node>): void {
  void (async () => {
    try {
      const el = await fn();
      if (!scope.disposed) body.replaceChildren(el);
    } catch (e) {
      if (!scope.disposed) body.replaceChildren(errorBox(e));
    }
  })();
}

export function modelsPage(_p: Record<string, string>, _q: URLSearchParams, scope: Scope): HTMLElement {
  const body = h('div', null, spinner());
  document.title = 'Models · Sextant';
  load(body, scope, async () => {
    const models: RegisteredModel[] = [];
    let token: string | undefined;
    do {
      const page = await searchRegisteredModels(token);
      models.push(...page.registered_models);
      token = page.next_page_token;
    } while (token && models.length < 20000);
    models.sort((a, b) => a.name.localeCompare(b.name));
    return table(
      ['Name', 'Latest version', 'Updated'],
      models.map((m) => {
        const latest = (m.latest_versions ?? []).reduce((n, v) => Math.max(n, Number(v.version)), 0);
        return [link(modelHref(m.name), m.name), latest ? link(versionHref(m.name, String(latest)), 'Version ' + latest) : '—', fmtTime(m.last_updated_timestamp)];
      }),
      'No registered models yet: register one with mlflow.register_model() or log_model(..., registered_model_name=...).',
    );
  });
  return h('div', { class: 'page models' }, h('div', { class: 'page-head' }, crumbs(), h('h1', null, 'Registered models')), body);
}

export function modelPage(p: Record<string, string>, _q: URLSearchParams, scope: Scope): HTMLElement {
  const name = p.name;
  document.title = name + ' · Sextant';
  const body = h('div', null, spinner());
  load(body, scope, async () => {
    const [model, versions] = await Promise.all([getRegisteredModel(name), modelVersions(name)]);
    const aliases = new Map<string, string[]>();
    for (const a of model.aliases ?? []) aliases.set(a.version, [...(aliases.get(a.version) ?? []), a.alias]);
    return h(
      'div',
      null,
      model.description ? h('p', { class: 'description' }, model.description) : null,
      h('p', { class: 'muted' }, `Created ${fmtTime(model.creation_timestamp)} · updated ${fmtTime(model.last_updated_timestamp)}`),
      h('h2', null, 'Versions'),
      table(
        ['Version', 'Aliases', 'Stage', 'Status', 'Created', 'Run'],
        versions.map((v) => [
          link(versionHref(name, v.version), 'Version ' + v.version),
          (aliases.get(v.version) ?? v.aliases ?? []).map((a) => '@' + a).join(' ') || '—',
          v.current_stage || '—',
          v.status || '—',
          fmtTime(v.creation_timestamp),
          v.run_id ? link('/runs/' + encodeURIComponent(v.run_id), v.run_id) : '—',
        ]),
        'This model has no versions.',
      ),
    );
  });
  return h('div', { class: 'page model' }, h('div', { class: 'page-head' }, crumbs(), h('h1', { 'data-testid': 'model-name' }, name)), body);
}

export function modelVersionPage(p: Record<string, string>, _q: URLSearchParams, scope: Scope): HTMLElement {
  const name = p.name;
  const version = p.version;
  document.title = `${name} v${version} · Sextant`;
  const body = h('div', null, spinner());
  load(body, scope, async () => {
    const v = await getModelVersion(name, version);
    // The run's name, when the run can be read.
    const run = v.run_id ? await getRun(v.run_id).catch(() => null) : null;
    const rows: [string, string | Node][] = [
      ['Status', v.status || '—'],
      ['Stage', v.current_stage || '—'],
      ['Aliases', (v.aliases ?? []).map((a) => '@' + a).join(' ') || '—'],
      ['Created', fmtTime(v.creation_timestamp)],
      ['Source', v.source || '—'],
      ['Run', v.run_id ? link('/runs/' + encodeURIComponent(v.run_id), run?.info.run_name || v.run_id) : '—'],
    ];
    return h(
      'div',
      null,
      v.description ? h('p', { class: 'description' }, v.description) : null,
      h('table', { class: 'grid kv' }, h('tbody', null, rows.map(([k, val]) => h('tr', null, h('th', null, k), h('td', null, val))))),
      (v.tags ?? []).length ? h('h2', null, 'Tags') : null,
      (v.tags ?? []).length ? table(['Key', 'Value'], (v.tags ?? []).map((t) => [t.key, t.value]), '') : null,
    );
  });
  return h(
    'div',
    { class: 'page model-version' },
    h('div', { class: 'page-head' }, crumbs(link(modelHref(name), name)), h('h1', { 'data-testid': 'model-name' }, `${name} `, h('span', { class: 'muted' }, 'version ' + version))),
    body,
  );
}
