// MLflow's web UI routes with a hash (`/#/experiments/1/runs/<id>`), and
// the mlflow client prints such links ("View run ... at: <uri>/#/..."),
// as do MLflow's docs and the links people share. mlflowHashRoute turns
// one into the address of the matching Sextant page, or of the nearest
// one, so that every such link opens a page that shows what it named.

/** mlflowHashRoute returns the Sextant path for an MLflow hash route ("#/experiments/1"), or null when hash is not one. */
export function mlflowHashRoute(hash: string): string | null {
  if (!hash.startsWith('#/')) return null;
  const body = hash.slice(1);
  const qi = body.indexOf('?');
  const path = qi >= 0 ? body.slice(0, qi) : body;
  const query = new URLSearchParams(qi >= 0 ? body.slice(qi + 1) : '');
  const seg = path
    .split('/')
    .filter(Boolean)
    .map((s) => {
      try {
        return decodeURIComponent(s);
      } catch {
        return s;
      }
    });
  const enc = encodeURIComponent;
  const [head, a, b, c, d] = seg;
  switch (head) {
    case undefined:
      return '/';
    case 'experiments': {
      if (a === undefined) return '/';
      const exp = '/experiments/' + enc(a);
      // /experiments/<id>/runs/<run>[/<tab>...]: the run page.
      if (b === 'runs' && c !== undefined) return runPath(c, d);
      // The evaluation tab of a run (mlflow.genai.evaluate prints it).
      if (b === 'evaluation-runs' && query.get('selectedRunUuid')) return runPath(query.get('selectedRunUuid')!);
      // The runs table with a filter: Sextant's filter box takes it.
      const filter = query.get('searchFilter');
      // Every other tab (runs, overview, traces, models, datasets, a
      // logged model, s?...): the experiment page, the nearest.
      return filter ? exp + '?filter=' + enc(filter) : exp;
    }
    case 'runs':
      return a === undefined ? '/' : runPath(a, b);
    case 'compare-runs':
    case 'metric': {
      // ?runs=["a","b"]&experiments=["1"] (&metric="loss" on /metric).
      const runs = jsonList(query.get('runs'));
      if (runs.length === 1) return runPath(runs[0], head === 'metric' ? 'metrics' : undefined);
      if (runs.length > 1) return '/compare?runs=' + runs.map(enc).join(',');
      const exps = jsonList(query.get('experiments'));
      return exps.length ? '/experiments/' + enc(exps[0]) : '/';
    }
    case 'compare-experiments': {
      const exps = jsonList(query.get('experiments'));
      return exps.length ? '/experiments/' + enc(exps[0]) : '/';
    }
    case 'models':
      if (a === undefined) return '/models';
      if (b === 'versions' && c !== undefined) return '/models/' + enc(a) + '/versions/' + enc(c);
      return '/models/' + enc(a);
  }
  // Prompts, settings, anything newer: the workspace.
  return '/';
}

/** runPath is a run's page, on the tab an MLflow run subpage names. */
function runPath(runId: string, mlflowTab?: string): string {
  const tab: Record<string, string> = {
    metrics: 'metrics',
    'model-metrics': 'metrics',
    'system-metrics': 'system',
    artifacts: 'artifacts',
    artifactPath: 'artifacts',
  };
  const t = mlflowTab ? tab[mlflowTab] : undefined;
  return '/runs/' + encodeURIComponent(runId) + (t ? '?tab=' + t : '');
}

/** jsonList reads MLflow's JSON-array query values (["a","b"]); a plain comma list also works. */
function jsonList(v: string | null): string[] {
  if (!v) return [];
  try {
    const parsed = JSON.parse(v);
    if (Array.isArray(parsed)) return parsed.map(String).filter(Boolean);
    if (typeof parsed === 'string' || typeof parsed === 'number') return [String(parsed)];
  } catch {
    /* not JSON */
  }
  return v.split(',').map((s) => s.trim().replace(/^"|"$/g, '')).filter(Boolean);
}
