// Helpers for the browser tests: build and start a real sextant server on
// a free loopback port with a fresh data directory, talk to its HTTP API
// to seed data, and drive Debian's Chromium with playwright-core (never a
// downloaded browser).

import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readdirSync, rmSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
export const repo = resolve(here, '..', '..', '..');
export const shotDir = resolve(process.env.SEXTANT_SCREENSHOTS || join(repo, 'web', 'test-results', 'screenshots'));
export const CHROMIUM = process.env.SEXTANT_CHROMIUM || '/usr/bin/chromium';
export const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];

let binPath = process.env.SEXTANT_BIN || '';

/** sextantBin builds the Go binary once (or uses $SEXTANT_BIN). */
export function sextantBin() {
  if (binPath) return binPath;
  const dir = mkdtempSync(join(tmpdir(), 'sextant-ui-bin-'));
  binPath = join(dir, 'sextant');
  execFileSync('go', ['build', '-o', binPath, './cmd/sextant'], { cwd: repo, stdio: 'inherit' });
  return binPath;
}

/** mlflowPython is $SEXTANT_MLFLOW_PYTHON, else the newest complete cached mlflow environment's python. */
export function mlflowPython() {
  return cachedPython('SEXTANT_MLFLOW_PYTHON', /^mlflow-\d/);
}

/** mlPython is $SEXTANT_ML_PYTHON, else the cached ML environment's python (torch, mlflow). */
export function mlPython() {
  return cachedPython('SEXTANT_ML_PYTHON', /^ml-py/);
}

function cachedPython(variable, prefix) {
  if (process.env[variable]) return process.env[variable];
  const cache = process.env.SEXTANT_CACHE_DIR || join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'sextant');
  const dir = join(cache, 'venv');
  const envs = existsSync(dir)
    ? readdirSync(dir)
        .filter((d) => prefix.test(d) && existsSync(join(dir, d, '.complete')))
        .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }))
    : [];
  if (envs.length === 0) throw new Error(`no cached environment ${prefix}: set ${variable} or run ./scripts/test.sh e2e once (it caches them in ${dir})`);
  return join(dir, envs[envs.length - 1], 'bin', 'python');
}

export function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

/** startServer starts sextant server with a fresh data dir; returns {url, stop, stderr, api}. */
export async function startServer({ auth = 'off', extraArgs = [] } = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), 'sextant-ui-data-'));
  const port = await freePort();
  const args = ['server', '--host', '127.0.0.1', '--port', String(port), '--data-dir', dataDir, '--sqlite-synchronous', 'NORMAL', '--auth', auth, ...extraArgs];
  const proc = spawn(sextantBin(), args, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, SEXTANT_LOG_LEVEL: 'warn' } });
  let stderr = '';
  proc.stderr.on('data', (d) => (stderr += d));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (proc.exitCode != null) throw new Error('sextant server exited: ' + stderr);
    try {
      const r = await fetch(url + '/health');
      if (r.ok) break;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) throw new Error('sextant server did not start: ' + stderr);
    await sleep(100);
  }
  const srv = {
    url,
    dataDir,
    pid: proc.pid,
    get stderr() {
      return stderr;
    },
    headers: {},
    async api(method, path, body, { raw = false, headers = {} } = {}) {
      const init = { method, headers: { ...srv.headers, ...headers } };
      if (body !== undefined) {
        if (typeof body === 'string' || body instanceof Uint8Array) init.body = body;
        else {
          init.body = JSON.stringify(body);
          init.headers['Content-Type'] = 'application/json';
        }
      }
      const r = await fetch(url + path, init);
      if (raw) return r;
      const text = await r.text();
      if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
      return text ? JSON.parse(text) : {};
    },
    async stop() {
      proc.kill('SIGTERM');
      await new Promise((r) => (proc.exitCode != null ? r() : proc.once('exit', r)));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return srv;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** launch starts Chromium with a fresh profile; returns {context, page, close, cspViolations}. */
export async function launch() {
  const profile = mkdtempSync(join(tmpdir(), 'sextant-ui-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_FLAGS,
    viewport: { width: 1400, height: 900 },
    deviceScaleFactor: 1,
  });
  const problems = [];
  const watch = (page) => {
    page.on('console', (m) => {
      const t = m.text();
      if (/Content.Security.Policy|Refused to/i.test(t)) problems.push('CSP: ' + t);
      else if (m.type() === 'error' && !/Failed to load resource/.test(t)) problems.push('console error: ' + t);
    });
    page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  };
  context.on('page', watch);
  const page = context.pages()[0] ?? (await context.newPage());
  watch(page);
  return {
    context,
    page,
    problems,
    profile,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export async function screenshot(page, name) {
  mkdirSync(shotDir, { recursive: true });
  const p = join(shotDir, name + '.png');
  await page.screenshot({ path: p, fullPage: false });
  return p;
}

/** canvasInk counts the pixels of a canvas that are not transparent or background. */
export async function canvasInk(page, selector) {
  return page.evaluate((sel) => {
    const c = document.querySelector(sel);
    if (!c) return -1;
    const ctx = c.getContext('2d');
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0) n++;
    return n;
  }, selector);
}

// ---- seeding through the HTTP API ----

const ML = '/api/2.0/mlflow';

export async function createExperiment(srv, name) {
  return (await srv.api('POST', ML + '/experiments/create', { name })).experiment_id;
}

export async function createRun(srv, exp, name, { start = Date.now() - 3_600_000, tags = [] } = {}) {
  const r = await srv.api('POST', ML + '/runs/create', { experiment_id: exp, run_name: name, start_time: start, tags });
  return r.run.info.run_id;
}

export async function logBatch(srv, runId, { metrics = [], params = [], tags = [] }) {
  for (let i = 0; i < Math.max(1, metrics.length); i += 900) {
    await srv.api('POST', ML + '/runs/log-batch', { run_id: runId, metrics: metrics.slice(i, i + 900), params: i === 0 ? params : [], tags: i === 0 ? tags : [] });
  }
}

export async function finishRun(srv, runId, status = 'FINISHED') {
  await srv.api('POST', ML + '/runs/update', { run_id: runId, status, end_time: Date.now() });
}

export { existsSync };
