// The HTTP API client: JSON in and out, the session's CSRF header on
// every request that changes something, and errors as ApiError with the
// server's message (which the pages show as is).

import { parseValue } from './lib/series';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const CSRF_KEY = 'sextant.csrf';
let csrf = safeGet(CSRF_KEY);

function safeGet(k: string): string {
  try {
    return localStorage.getItem(k) ?? '';
  } catch {
    return '';
  }
}

export function setCsrf(token: string): void {
  csrf = token;
  try {
    if (token) localStorage.setItem(CSRF_KEY, token);
    else localStorage.removeItem(CSRF_KEY);
  } catch {
    /* private mode */
  }
}

/** Called when a request answers 401, so the app can show the login page. */
export let onUnauthenticated: () => void = () => {};
export function setOnUnauthenticated(fn: () => void): void {
  onUnauthenticated = fn;
}

type Query = Record<string, string | number | boolean | undefined | null | (string | number)[]>;

export function qs(q?: Query): string {
  if (!q) return '';
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) {
    if (v == null || v === '') continue;
    if (Array.isArray(v)) for (const x of v) p.append(k, String(x));
    else p.append(k, String(v));
  }
  const s = p.toString();
  return s ? '?' + s : '';
}

export interface RequestOpts {
  query?: Query;
  body?: unknown;
  signal?: AbortSignal;
  headers?: Record<string, string>;
  raw?: boolean; // return the Response without reading it
}

export async function request(method: string, path: string, opts: RequestOpts = {}): Promise<any> {
  // X-Requested-With: the server then answers 401 without a Basic
  // challenge, which would make the browser show its own sign-in dialog.
  const headers: Record<string, string> = { 'X-Requested-With': 'XMLHttpRequest', ...opts.headers };
  let body: BodyInit | undefined;
  if (opts.body instanceof Blob || opts.body instanceof ArrayBuffer) {
    body = opts.body;
  } else if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.body);
  }
  if (method !== 'GET' && method !== 'HEAD' && csrf) headers['X-Sextant-CSRF'] = csrf;
  const res = await fetch(path + qs(opts.query), { method, headers, body, signal: opts.signal, credentials: 'same-origin' });
  if (!res.ok) {
    let code = 'HTTP_' + res.status;
    let message = `${method} ${path}: HTTP ${res.status}`;
    try {
      const j = await res.json();
      if (j && typeof j.message === 'string') message = j.message;
      if (j && typeof j.error_code === 'string') code = j.error_code;
    } catch {
      /* not JSON */
    }
    if (res.status === 401) onUnauthenticated();
    throw new ApiError(res.status, code, message);
  }
  if (opts.raw) return res;
  const t = await res.text();
  return t ? JSON.parse(t) : {};
}

export const get = (path: string, query?: Query, signal?: AbortSignal) => request('GET', path, { query, signal });
export const post = (path: string, body: unknown, signal?: AbortSignal) => request('POST', path, { body, signal });

const ML = '/api/2.0/mlflow';
const SX = '/api/2.0/sextant';

// ---- shapes ----

export interface KV {
  key: string;
  value: string;
}
export interface Metric {
  key: string;
  value: number;
  timestamp: number;
  step: number;
}
export interface RunInfo {
  run_id: string;
  run_name: string;
  experiment_id: string;
  user_id?: string;
  status: string;
  start_time?: number;
  end_time?: number;
  artifact_uri?: string;
  lifecycle_stage?: string;
}
export interface Run {
  info: RunInfo;
  data: { metrics: Metric[]; params: KV[]; tags: KV[] };
}
export interface Experiment {
  experiment_id: string;
  name: string;
  artifact_location?: string;
  lifecycle_stage?: string;
  creation_time?: number;
  last_update_time?: number;
  tags?: KV[];
}
export interface User {
  id: number;
  email: string;
  display_name?: string;
  admin: boolean;
}

// normRun fixes up a run as parsed, in place: a page of 100 runs with 3,000
// latest metrics each is 300,000 metric objects, and copying them doubled
// the garbage the page collects while the first charts wait.
function normRun(r: any): Run {
  const data = r.data ?? (r.data = {});
  const metrics: any[] = data.metrics ?? (data.metrics = []);
  for (const m of metrics) {
    if (typeof m.value !== 'number') m.value = parseValue(m.value);
    if (typeof m.timestamp !== 'number') m.timestamp = Number(m.timestamp ?? 0);
    if (typeof m.step !== 'number') m.step = Number(m.step ?? 0);
  }
  data.params ??= [];
  data.tags ??= [];
  return r as Run;
}

// ---- auth ----

export async function whoami(): Promise<{ user: User; multi_user: boolean }> {
  return get(SX + '/auth/whoami');
}
export async function login(email: string, password: string): Promise<{ user: User; csrf_token: string }> {
  const r = await post(SX + '/auth/login', { email, password });
  setCsrf(r.csrf_token);
  return r;
}
export async function logout(): Promise<void> {
  try {
    await post(SX + '/auth/logout', {});
  } finally {
    setCsrf('');
  }
}

// ---- experiments and runs ----

export async function searchExperiments(filter: string, pageToken?: string, maxResults = 1000): Promise<{ experiments: Experiment[]; next_page_token?: string }> {
  const r = await post(ML + '/experiments/search', { filter: filter || undefined, max_results: maxResults, page_token: pageToken, order_by: ['name ASC'] });
  return { experiments: r.experiments ?? [], next_page_token: r.next_page_token };
}
export async function getExperiment(id: string): Promise<Experiment> {
  return (await get(ML + '/experiments/get', { experiment_id: id })).experiment;
}
export async function createExperiment(name: string): Promise<string> {
  return (await post(ML + '/experiments/create', { name })).experiment_id;
}

export interface RunsPage {
  runs: Run[];
  next_page_token?: string;
}
export async function searchRuns(
  experimentIds: string[],
  filter: string,
  orderBy: string[],
  maxResults: number,
  pageToken?: string,
  signal?: AbortSignal,
): Promise<RunsPage> {
  const r = await post(
    ML + '/runs/search',
    { experiment_ids: experimentIds, filter: filter || undefined, order_by: orderBy.length ? orderBy : undefined, max_results: maxResults, page_token: pageToken },
    signal,
  );
  return { runs: (r.runs ?? []).map(normRun), next_page_token: r.next_page_token };
}
export async function getRun(id: string, signal?: AbortSignal): Promise<Run> {
  return normRun((await get(ML + '/runs/get', { run_id: id }, signal)).run);
}
export async function setTag(runId: string, key: string, value: string): Promise<void> {
  await post(ML + '/runs/set-tag', { run_id: runId, key, value });
}

/** A point of a bulk-interval answer. */
export interface RunPoint {
  run_id: string;
  step: number;
  ts: number;
  value: number;
}

/** bulkIntervalURL is the get-history-bulk-interval request getHistoryBulkInterval makes. */
export function bulkIntervalURL(runIds: string[], key: string, maxResults: number, range: { start: number; end: number } | null, minmax: boolean): string {
  return (
    ML +
    '/metrics/get-history-bulk-interval' +
    qs({
      run_ids: runIds,
      metric_key: key,
      max_results: Math.max(2, Math.min(2500, Math.round(maxResults))),
      start_step: range ? Math.floor(range.start) : undefined,
      end_step: range ? Math.ceil(range.end) : undefined,
      sampling: minmax ? 'minmax' : undefined,
    })
  );
}

/**
 * getHistoryBulkInterval fetches up to maxResults points per run (at most
 * 100 runs) of one metric, downsampled by the server; with minmax, each
 * step bucket returns its lowest and highest point.
 */
export async function getHistoryBulkInterval(
  runIds: string[],
  key: string,
  maxResults: number,
  range: { start: number; end: number } | null,
  minmax: boolean,
  signal?: AbortSignal,
): Promise<RunPoint[]> {
  const r = await get(
    ML + '/metrics/get-history-bulk-interval',
    {
      run_ids: runIds,
      metric_key: key,
      max_results: Math.max(2, Math.min(2500, Math.round(maxResults))),
      start_step: range ? Math.floor(range.start) : undefined,
      end_step: range ? Math.ceil(range.end) : undefined,
      sampling: minmax ? 'minmax' : undefined,
    },
    signal,
  );
  const ms: any[] = r.metrics ?? [];
  const out: RunPoint[] = new Array(ms.length);
  for (let i = 0; i < ms.length; i++) {
    const m = ms[i];
    out[i] = { run_id: m.run_id, step: Number(m.step ?? 0), ts: Number(m.timestamp ?? 0), value: parseValue(m.value) };
  }
  return out;
}

// ---- artifacts ----

export interface FileInfo {
  path: string;
  is_dir: boolean;
  file_size?: number;
}
export async function listArtifacts(runId: string, path: string): Promise<FileInfo[]> {
  const r = await get(ML + '/artifacts/list', { run_id: runId, path: path || undefined });
  return (r.files ?? []).map((f: any) => ({ path: f.path, is_dir: !!f.is_dir, file_size: f.file_size != null ? Number(f.file_size) : undefined }));
}

/** artifactURL is the proxy URL of a run's artifact, or '' when the run's artifacts are not served by this server. */
export function artifactURL(run: RunInfo, path: string): string {
  return proxyURL(run.artifact_uri ?? '', path);
}

/** proxyBase is the proxy path of an mlflow-artifacts: URI ("1/models/m-.../artifacts"), or null for other stores. */
export function proxyBase(uri: string): string | null {
  const m = /^mlflow-artifacts:\/*(.*)$/.exec(uri);
  return m ? m[1].replace(/\/+$/, '') : null;
}

/** proxyURL is the download URL of path under an mlflow-artifacts: URI, or ''. */
export function proxyURL(uri: string, path: string): string {
  const base = proxyBase(uri);
  if (base == null) return '';
  return '/api/2.0/mlflow-artifacts/artifacts/' + [base, path].filter(Boolean).join('/').split('/').map(encodeURIComponent).join('/');
}

/** A tree of artifacts to browse: a run's, or a logged model's. */
export interface ArtifactSource {
  list: (path: string) => Promise<FileInfo[]>;
  /** the download URL of a file, '' when this server does not hold it */
  url: (path: string) => string;
}

export function runArtifacts(run: RunInfo, under = ''): ArtifactSource {
  const join = (p: string) => [under, p].filter(Boolean).join('/');
  const strip = (p: string) => (under && p.startsWith(under + '/') ? p.slice(under.length + 1) : p);
  return {
    list: async (path) => (await listArtifacts(run.run_id, join(path))).map((f) => ({ ...f, path: strip(f.path) })),
    url: (path) => artifactURL(run, join(path)),
  };
}

/** proxyArtifacts browses the files under an mlflow-artifacts: URI through the proxy's listing. */
export function proxyArtifacts(uri: string): ArtifactSource {
  const base = proxyBase(uri);
  return {
    list: async (path) => {
      if (base == null) throw new Error(`The files of ${uri} are not stored on this server.`);
      const r = await get('/api/2.0/mlflow-artifacts/artifacts', { path: [base, path].filter(Boolean).join('/') });
      return (r.files ?? []).map((f: any) => ({ path: [path, f.path].filter(Boolean).join('/'), is_dir: !!f.is_dir, file_size: f.file_size != null ? Number(f.file_size) : undefined }));
    },
    url: (path) => proxyURL(uri, path),
  };
}

// ---- logged models ----

export interface LoggedModel {
  info: {
    model_id: string;
    experiment_id: string;
    name: string;
    creation_timestamp_ms?: number;
    last_updated_timestamp_ms?: number;
    artifact_uri: string;
    status: string;
    model_type?: string;
    source_run_id?: string;
    status_message?: string;
    tags?: KV[];
    registrations?: { name: string; version: string }[];
  };
  data: { params?: KV[]; metrics?: Metric[] };
}

export async function getLoggedModel(id: string): Promise<LoggedModel> {
  return (await get(ML + '/logged-models/' + encodeURIComponent(id))).model;
}

/** runLoggedModels lists the models a run logged (source_run_id), newest first. */
export async function runLoggedModels(run: RunInfo): Promise<LoggedModel[]> {
  const out: LoggedModel[] = [];
  let token: string | undefined;
  do {
    const r = await post(ML + '/logged-models/search', {
      experiment_ids: [run.experiment_id],
      filter: `source_run_id = '${run.run_id}'`,
      max_results: 100,
      page_token: token,
    });
    out.push(...(r.models ?? []));
    token = r.next_page_token;
  } while (token && out.length < 1000);
  return out.sort((a, b) => (b.info.creation_timestamp_ms ?? 0) - (a.info.creation_timestamp_ms ?? 0));
}

/** experimentLoggedModels lists the models logged in an experiment, newest first (at most 5,000). */
export async function experimentLoggedModels(expId: string): Promise<LoggedModel[]> {
  const out: LoggedModel[] = [];
  let token: string | undefined;
  do {
    const r = await post(ML + '/logged-models/search', { experiment_ids: [expId], max_results: 100, page_token: token });
    out.push(...(r.models ?? []));
    token = r.next_page_token;
  } while (token && out.length < 5000);
  return out.sort((a, b) => (b.info.creation_timestamp_ms ?? 0) - (a.info.creation_timestamp_ms ?? 0));
}

/** runModelVersions lists the registered model versions made from a run. */
export async function runModelVersions(runId: string): Promise<ModelVersion[]> {
  const r = await get(ML + '/model-versions/search', { filter: `run_id = '${runId}'`, max_results: 1000 });
  return r.model_versions ?? [];
}

// ---- workspace, permissions, comments ----

export async function listFolders(path: string): Promise<string[]> {
  const r = await get(SX + '/workspace/list', { path });
  return (r.folders ?? []).map((f: any) => f.path);
}
export async function mkdirs(path: string): Promise<void> {
  await post(SX + '/workspace/mkdirs', { path });
}
export interface Grant {
  principal: string;
  level: string;
}
export async function getPermissions(resource: string): Promise<Grant[]> {
  return (await get(SX + '/permissions', { resource })).grants ?? [];
}
export async function setPermission(resource: string, principal: string, level: string): Promise<void> {
  await request('PUT', SX + '/permissions', { body: { resource, principal, level } });
}
export interface Comment {
  id: number;
  author: string;
  body: string;
  created_time: number;
  updated_time: number;
}
export async function listComments(kind: string, id: string): Promise<Comment[]> {
  return (await get(SX + '/comments', { target_kind: kind, target_id: id })).comments ?? [];
}
export async function addComment(kind: string, id: string, body: string): Promise<Comment> {
  return (await post(SX + '/comments', { target_kind: kind, target_id: id, body })).comment;
}
export async function deleteComment(id: number): Promise<void> {
  await request('DELETE', SX + '/comments', { body: { id } });
}

export { ML, SX };

// ---- the model registry ----

export interface ModelVersion {
  name: string;
  version: string;
  creation_timestamp?: number;
  last_updated_timestamp?: number;
  source?: string;
  run_id?: string;
  status?: string;
  description?: string;
  current_stage?: string;
  aliases?: string[];
  tags?: KV[];
  model_id?: string;
  user_id?: string;
}
export interface RegisteredModel {
  name: string;
  creation_timestamp?: number;
  last_updated_timestamp?: number;
  description?: string;
  user_id?: string;
  latest_versions?: ModelVersion[];
  aliases?: { alias: string; version: string }[];
  tags?: KV[];
}

export async function searchRegisteredModels(pageToken?: string): Promise<{ registered_models: RegisteredModel[]; next_page_token?: string }> {
  const r = await get(ML + '/registered-models/search', { max_results: 1000, page_token: pageToken });
  return { registered_models: r.registered_models ?? [], next_page_token: r.next_page_token };
}

export async function getRegisteredModel(name: string): Promise<RegisteredModel> {
  return (await get(ML + '/registered-models/get', { name })).registered_model;
}

/** modelVersions returns every version of a registered model, newest first. */
export async function modelVersions(name: string): Promise<ModelVersion[]> {
  const out: ModelVersion[] = [];
  let token: string | undefined;
  do {
    const r = await get(ML + '/model-versions/search', { filter: `name = '${name.replace(/'/g, "''")}'`, max_results: 1000, page_token: token });
    out.push(...(r.model_versions ?? []));
    token = r.next_page_token;
  } while (token && out.length < 20000);
  return out.sort((a, b) => Number(b.version) - Number(a.version));
}

export async function getModelVersion(name: string, version: string): Promise<ModelVersion> {
  return (await get(ML + '/model-versions/get', { name, version })).model_version;
}
