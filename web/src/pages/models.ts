// Models: the registry (registered models, one model with its versions,
// aliases and tags, one version with the run and the logged model it came
// from and its files) and MLflow 3's logged models (a model's params,
// metrics, tags, registrations and files). MLflow's links to #/models/...
// and #/experiments/<id>/models/<model id> land here.

import {
  experimentLoggedModels,
  getExperiment,
  getLoggedModel,
  getModelVersion,
  getRegisteredModel,
  getRun,
  LoggedModel,
  modelVersions,
  ModelVersion,
  proxyArtifacts,
  RegisteredModel,
  Run,
  runArtifacts,
  runLoggedModels,
  runModelVersions,
  searchRegisteredModels,
} from '../api';
import { artifactsView } from '../components/artifacts';
import { errorBox, h, link, Scope, spinner } from '../dom';
import { fmtNumber, fmtTime } from '../lib/format';
import { naturalCompare } from '../lib/keys';

export const modelHref = (name: string) => '/models/' + encodeURIComponent(name);
export const versionHref = (name: string, v: string) => modelHref(name) + '/versions/' + encodeURIComponent(v);
export const loggedModelHref = (exp: string, id: string) => '/experiments/' + encodeURIComponent(exp) + '/models/' + encodeURIComponent(id);
export const runHref = (id: string) => '/runs/' + encodeURIComponent(id);
export const loggedModelsHref = (exp: string) => '/experiments/' + encodeURIComponent(exp) + '/models';

function crumbs(...parts: (HTMLElement | string)[]): HTMLElement {
  const nav = h('nav', { class: 'crumbs', 'aria-label': 'Model' }, link('/models', 'Models'));
  for (const p of parts) nav.append(h('span', { class: 'sep' }, '/'), p);
  return nav;
}

function table(head: string[], rows: (string | Node)[][], empty: string, attrs: Record<string, string> = {}): HTMLElement {
  if (rows.length === 0) return h('p', { class: 'empty' }, empty);
  return h(
    'div',
    { class: 'scroll-x' },
    h(
      'table',
      { class: 'grid', ...attrs },
      h('thead', null, h('tr', null, head.map((c) => h('th', null, c)))),
      h('tbody', null, rows.map((r) => h('tr', null, r.map((c) => h('td', null, c))))),
    ),
  );
}

function kv(rows: [string, string | Node | null | undefined][]): HTMLElement {
  return h('table', { class: 'grid kv' }, h('tbody', null, rows.filter(([, v]) => v != null && v !== '').map(([k, v]) => h('tr', null, h('th', null, k), h('td', null, v!)))));
}

/** aliasChips shows aliases as @name chips. */
function aliasChips(aliases: readonly string[]): HTMLElement | string {
  if (!aliases.length) return '—';
  return h('span', { class: 'chips' }, aliases.map((a) => h('span', { class: 'chip alias', 'data-alias': a }, '@' + a)));
}

function tagChips(tags: readonly { key: string; value: string }[], max = 4): HTMLElement | string {
  const shown = tags.filter((t) => !t.key.startsWith('mlflow.'));
  if (!shown.length) return '—';
  return h(
    'span',
    { class: 'chips' },
    shown.slice(0, max).map((t) => h('span', { class: 'chip tag', title: `${t.key} = ${t.value}` }, t.value ? `${t.key}=${t.value}` : t.key)),
    shown.length > max ? h('span', { class: 'muted' }, ` +${shown.length - max}`) : null,
  );
}

function tagsTable(tags: readonly { key: string; value: string }[] | undefined): HTMLElement {
  const t = [...(tags ?? [])].sort((a, b) => naturalCompare(a.key, b.key));
  return table(['Key', 'Value'], t.map((x) => [x.key, x.value]), 'No tags.', { 'data-testid': 'tags' });
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

/** Names of runs and experiments, fetched once per page. */
class Names {
  private runs = new Map<string, Promise<Run | null>>();
  private exps = new Map<string, Promise<string>>();
  run(id: string): Promise<Run | null> {
    let p = this.runs.get(id);
    if (!p) this.runs.set(id, (p = getRun(id).catch(() => null)));
    return p;
  }
  experiment(id: string): Promise<string> {
    let p = this.exps.get(id);
    if (!p) this.exps.set(id, (p = getExperiment(id).then((e) => e.name, () => 'Experiment ' + id)));
    return p;
  }
  /** runLink is a link named after the run (its id until the name comes). */
  runLink(id: string): HTMLElement {
    const a = link(runHref(id), id);
    a.classList.add('run-link');
    void this.run(id).then((r) => r && (a.textContent = r.info.run_name || id));
    return a;
  }
  expLink(id: string): HTMLElement {
    const a = link('/experiments/' + encodeURIComponent(id), 'Experiment ' + id);
    void this.experiment(id).then((n) => (a.textContent = n));
    return a;
  }
}

// ---- the registry ----

export function modelsPage(_p: Record<string, string>, q: URLSearchParams, scope: Scope): HTMLElement {
  const body = h('div', null, spinner());
  const find = h('input', { type: 'search', placeholder: 'Filter models by name…', 'aria-label': 'Filter models', value: q.get('q') ?? '', class: 'search' });
  document.title = 'Models · Sextant';
  load(body, scope, async () => {
    const models: RegisteredModel[] = [];
    let token: string | undefined;
    do {
      const page = await searchRegisteredModels(token);
      models.push(...page.registered_models);
      token = page.next_page_token;
    } while (token && models.length < 20000);
    models.sort((a, b) => naturalCompare(a.name, b.name));
    const holder = h('div');
    const draw = () => {
      const t = find.value.trim().toLowerCase();
      const shown = t ? models.filter((m) => m.name.toLowerCase().includes(t)) : models;
      holder.replaceChildren(
        table(
          ['Name', 'Latest version', 'Aliases', 'Tags', 'Description', 'Updated'],
          shown.map((m) => {
            const latest = (m.latest_versions ?? []).reduce((n, v) => Math.max(n, Number(v.version)), 0);
            const aliases = (m.aliases ?? []).map((a) => `${a.alias} → v${a.version}`);
            return [
              link(modelHref(m.name), m.name),
              latest ? link(versionHref(m.name, String(latest)), 'Version ' + latest) : '—',
              aliasChips(aliases),
              tagChips(m.tags ?? []),
              h('span', { class: 'clip', title: m.description ?? '' }, (m.description ?? '').split('\n')[0] || '—'),
              fmtTime(m.last_updated_timestamp),
            ];
          }),
          models.length ? 'No model matches the filter.' : 'No registered models yet: register one with mlflow.register_model() or log_model(..., registered_model_name=...).',
          { 'data-testid': 'models' },
        ),
      );
    };
    find.addEventListener('input', draw);
    draw();
    return holder;
  });
  return h('div', { class: 'page models' }, h('div', { class: 'page-head' }, crumbs(), h('h1', null, 'Registered models')), h('div', { class: 'toolbar' }, find), body);
}

export function modelPage(p: Record<string, string>, _q: URLSearchParams, scope: Scope): HTMLElement {
  const name = p.name;
  document.title = name + ' · Sextant';
  const body = h('div', null, spinner());
  const names = new Names();
  load(body, scope, async () => {
    const [model, versions] = await Promise.all([getRegisteredModel(name), modelVersions(name)]);
    const aliases = new Map<string, string[]>();
    for (const a of model.aliases ?? []) aliases.set(a.version, [...(aliases.get(a.version) ?? []), a.alias]);
    return h(
      'div',
      null,
      model.description ? h('p', { class: 'description' }, model.description) : null,
      h('p', { class: 'muted' }, `Created ${fmtTime(model.creation_timestamp)} · updated ${fmtTime(model.last_updated_timestamp)}${model.user_id ? ' · ' + model.user_id : ''}`),
      h('h2', null, `Versions (${versions.length})`),
      table(
        ['Version', 'Aliases', 'Stage', 'Created', 'Source run', 'Logged model', 'Tags'],
        versions.map((v) => [
          link(versionHref(name, v.version), 'Version ' + v.version),
          aliasChips(aliases.get(v.version) ?? v.aliases ?? []),
          v.current_stage && v.current_stage !== 'None' ? v.current_stage : '—',
          fmtTime(v.creation_timestamp),
          v.run_id ? names.runLink(v.run_id) : '—',
          v.model_id ? loggedModelLink(v.model_id, names) : '—',
          tagChips(v.tags ?? [], 3),
        ]),
        'This model has no versions.',
        { 'data-testid': 'versions' },
      ),
      h('h2', null, 'Aliases'),
      table(
        ['Alias', 'Version', 'Load with'],
        (model.aliases ?? []).map((a) => [h('span', { class: 'chip alias' }, '@' + a.alias), link(versionHref(name, a.version), 'Version ' + a.version), h('code', null, `models:/${name}@${a.alias}`)]),
        'No aliases. Set one with MlflowClient().set_registered_model_alias(name, alias, version).',
        { 'data-testid': 'aliases' },
      ),
      h('h2', null, 'Tags'),
      tagsTable(model.tags),
    );
  });
  return h('div', { class: 'page model' }, h('div', { class: 'page-head' }, crumbs(), h('h1', { 'data-testid': 'model-name' }, name)), body);
}

/** loggedModelLink links a logged model by id, named once its name is known. */
function loggedModelLink(id: string, _names: Names): HTMLElement {
  const a = h('a', { 'data-model-id': id }, id);
  void getLoggedModel(id).then(
    (m) => {
      a.href = loggedModelHref(m.info.experiment_id, id);
      a.textContent = m.info.name || id;
    },
    () => {},
  );
  return a;
}

/** sourceFiles says where a version's files are: its logged model, the run's artifacts, or the proxy. */
async function versionFiles(v: ModelVersion, names: Names, scope: Scope): Promise<HTMLElement> {
  if (v.model_id) {
    const m = await getLoggedModel(v.model_id).catch(() => null);
    if (m) return artifactsView(proxyArtifacts(m.info.artifact_uri), scope, 'The logged model has no files.');
  }
  const runs = /^runs:\/([0-9a-f]+)\/?(.*)$/.exec(v.source ?? '');
  if (runs) {
    const r = await names.run(runs[1]);
    if (r) return artifactsView(runArtifacts(r.info, runs[2].replace(/\/+$/, '')), scope, `No files under ${v.source}.`);
  }
  if ((v.source ?? '').startsWith('mlflow-artifacts:')) return artifactsView(proxyArtifacts(v.source!), scope, `No files under ${v.source}.`);
  return h('p', { class: 'empty' }, `The files are at ${v.source || 'an unknown place'}, outside this server.`);
}

export function modelVersionPage(p: Record<string, string>, _q: URLSearchParams, scope: Scope): HTMLElement {
  const name = p.name;
  const version = p.version;
  document.title = `${name} v${version} · Sextant`;
  const body = h('div', null, spinner());
  const names = new Names();
  load(body, scope, async () => {
    const v = await getModelVersion(name, version);
    const run = v.run_id ? await names.run(v.run_id) : null;
    const files = h('div', null, spinner());
    load(files, scope, () => versionFiles(v, names, scope));
    return h(
      'div',
      null,
      v.description ? h('p', { class: 'description' }, v.description) : null,
      kv([
        ['Status', v.status || '—'],
        ['Aliases', aliasChips(v.aliases ?? [])],
        ['Stage', v.current_stage && v.current_stage !== 'None' ? v.current_stage : null],
        ['Created', fmtTime(v.creation_timestamp)],
        ['Updated', fmtTime(v.last_updated_timestamp)],
        ['Registered by', v.user_id],
        ['Source', v.source || '—'],
        ['Source run', v.run_id ? link(runHref(v.run_id), run?.info.run_name || v.run_id) : '—'],
        ['Experiment', run ? names.expLink(run.info.experiment_id) : null],
        ['Logged model', v.model_id ? loggedModelLink(v.model_id, names) : null],
        ['Load with', h('code', null, `mlflow.pyfunc.load_model("models:/${name}/${version}")`)],
      ]),
      h('h2', null, 'Tags'),
      tagsTable(v.tags),
      h('h2', null, 'Files'),
      files,
    );
  });
  return h(
    'div',
    { class: 'page model-version' },
    h('div', { class: 'page-head' }, crumbs(link(modelHref(name), name)), h('h1', { 'data-testid': 'model-name' }, `${name} `, h('span', { class: 'muted' }, 'version ' + version))),
    body,
  );
}

// ---- logged models ----

/** loggedModelsPage lists the models logged in an experiment (MLflow 3's logged models), newest first. */
export function loggedModelsPage(p: Record<string, string>, _q: URLSearchParams, scope: Scope): HTMLElement {
  const expId = p.exp;
  const names = new Names();
  const body = h('div', null, spinner());
  document.title = 'Logged models · Sextant';
  load(body, scope, async () => {
    const ms = await experimentLoggedModels(expId);
    if (!ms.length) return h('p', { class: 'empty' }, 'No models were logged in this experiment.');
    return h(
      'table',
      { class: 'grid', 'data-testid': 'logged-models' },
      h('thead', null, h('tr', null, ['Model', 'Status', 'Created', 'Run'].map((x) => h('th', null, x)))),
      h(
        'tbody',
        null,
        ms.map((m) =>
          h(
            'tr',
            null,
            h('td', null, link(loggedModelHref(expId, m.info.model_id), m.info.name || m.info.model_id)),
            h('td', null, String(m.info.status).replace(/^LOGGED_MODEL_/, '')),
            h('td', { class: 'nowrap' }, fmtTime(m.info.creation_timestamp_ms)),
            h('td', null, m.info.source_run_id ? names.runLink(m.info.source_run_id) : ''),
          ),
        ),
      ),
    );
  });
  const nav = h('nav', { class: 'crumbs', 'aria-label': 'Experiment' }, names.expLink(expId), h('span', { class: 'sep' }, '/'));
  return h('div', { class: 'page logged-models' }, h('div', { class: 'page-head' }, nav, h('h1', null, 'Logged models')), body);
}

export function loggedModelPage(p: Record<string, string>, _q: URLSearchParams, scope: Scope): HTMLElement {
  const id = p.model;
  const expId = p.exp;
  const names = new Names();
  const title = h('h1', { 'data-testid': 'logged-model-name' }, id);
  const body = h('div', null, spinner());
  document.title = id + ' · Sextant';
  load(body, scope, async () => {
    const m = await getLoggedModel(id);
    const i = m.info;
    title.replaceChildren(i.name || i.model_id, ' ', h('span', { class: 'status status-' + String(i.status).toLowerCase().replace(/^logged_model_/, '') }, String(i.status).replace(/^LOGGED_MODEL_/, '')));
    document.title = (i.name || i.model_id) + ' · Sextant';
    const params = [...(m.data.params ?? [])].sort((a, b) => naturalCompare(a.key, b.key));
    const metrics = [...(m.data.metrics ?? [])].sort((a, b) => naturalCompare(a.key, b.key));
    return h(
      'div',
      null,
      kv([
        ['Model ID', i.model_id],
        ['Status', i.status + (i.status_message ? ' — ' + i.status_message : '')],
        ['Type', i.model_type],
        ['Created', fmtTime(i.creation_timestamp_ms)],
        ['Source run', i.source_run_id ? names.runLink(i.source_run_id) : '—'],
        ['Experiment', names.expLink(i.experiment_id)],
        ['Registered as', (i.registrations ?? []).length ? h('span', { class: 'chips' }, (i.registrations ?? []).map((r) => link(versionHref(r.name, r.version), `${r.name} v${r.version}`))) : '—'],
        ['Artifacts', i.artifact_uri],
        ['Load with', h('code', null, `mlflow.pyfunc.load_model("models:/${i.model_id}")`)],
      ]),
      h(
        'div',
        { class: 'cols' },
        h('section', null, h('h2', null, `Parameters (${params.length})`), table(['Key', 'Value'], params.map((x) => [x.key, x.value]), 'No parameters.')),
        h(
          'section',
          null,
          h('h2', null, `Metrics (${metrics.length})`),
          table(['Key', 'Value', 'Step'], metrics.map((x) => [x.key, fmtNumber(Number(x.value)), String(x.step ?? '')]), 'No metrics linked to this model.'),
        ),
      ),
      h('h2', null, 'Tags'),
      tagsTable(i.tags),
      h('h2', null, 'Files'),
      artifactsView(proxyArtifacts(i.artifact_uri), scope, 'This model has no files.'),
    );
  });
  const nav = h('nav', { class: 'crumbs', 'aria-label': 'Experiment' }, names.expLink(expId), h('span', { class: 'sep' }, '/'), link(loggedModelsHref(expId), 'Logged models'), h('span', { class: 'sep' }, '/'));
  return h('div', { class: 'page logged-model', 'data-testid': 'logged-model' }, h('div', { class: 'page-head' }, nav, title), body);
}

/**
 * runModels is the run's models: the models it logged (each linked to its
 * page and, inline, its files) and the registered versions made from it.
 */
export function runModels(run: Run, scope: Scope, opts: { files: boolean }): HTMLElement {
  const el = h('section', { class: 'run-models', 'data-testid': 'run-models' }, h('h2', null, 'Models'), spinner());
  void (async () => {
    try {
      const [models, versions] = await Promise.all([runLoggedModels(run.info), runModelVersions(run.info.run_id).catch(() => [] as ModelVersion[])]);
      if (scope.disposed) return;
      const byModel = new Map<string, ModelVersion[]>();
      for (const v of versions) if (v.model_id) byModel.set(v.model_id, [...(byModel.get(v.model_id) ?? []), v]);
      const regs = (m: LoggedModel) => {
        const list = [...(m.info.registrations ?? []).map((r) => ({ name: r.name, version: r.version })), ...(byModel.get(m.info.model_id) ?? []).map((v) => ({ name: v.name, version: v.version }))];
        const seen = new Set<string>();
        return list.filter((r) => !seen.has(r.name + '/' + r.version) && seen.add(r.name + '/' + r.version));
      };
      const items = models.map((m) => {
        const head = h(
          'div',
          { class: 'model-row', 'data-model-id': m.info.model_id },
          link(loggedModelHref(m.info.experiment_id, m.info.model_id), m.info.name || m.info.model_id),
          ' ',
          h('span', { class: 'muted' }, `${m.info.model_type ? m.info.model_type + ' · ' : ''}${String(m.info.status).replace(/^LOGGED_MODEL_/, '').toLowerCase()} · ${fmtTime(m.info.creation_timestamp_ms)}`),
          ...regs(m).map((r) => h('span', { class: 'chip' }, link(versionHref(r.name, r.version), `${r.name} v${r.version}`))),
        );
        if (!opts.files) return head;
        const files = h('div', { class: 'model-files' });
        const det = h('details', { class: 'model-details' }, h('summary', null, head), files);
        let shown = false;
        det.addEventListener('toggle', () => {
          if (det.open && !shown) {
            shown = true;
            files.replaceChildren(artifactsView(proxyArtifacts(m.info.artifact_uri), scope, 'This model has no files.'));
          }
        });
        if (models.length === 1) det.open = true;
        return det;
      });
      const others = versions.filter((v) => !v.model_id || !models.some((m) => m.info.model_id === v.model_id));
      el.replaceChildren(
        ...[
          h('h2', null, `Models (${models.length})`),
        models.length ? h('div', { class: 'model-list' }, items) : h('p', { class: 'empty' }, 'This run logged no models.'),
          others.length ? h('p', null, 'Registered from this run: ', ...others.map((v) => h('span', { class: 'chip' }, link(versionHref(v.name, v.version), `${v.name} v${v.version}`)))) : '',
        ],
      );
    } catch (e) {
      el.replaceChildren(h('h2', null, 'Models'), errorBox(e));
    }
  })();
  return el;
}
