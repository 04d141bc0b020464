// The links the mlflow client prints open the right page. A job runs under
// `sextant run` with the real mlflow client (mlflow_links.py, in the
// cached mlflow environment); the links both printed, the client's
// "View run ... at: <uri>/#/experiments/<id>/runs/<id>" and "View
// experiment at:" and the launcher's "view it at: <uri>/runs/<id>", and the
// other shapes of MLflow's UI addresses built from them (the registry,
// compare-runs, metric, run subpages, experiment tabs, logged models) are
// opened in Chromium, and each page must show that run, experiment or
// model.
//
//   cd web && SEXTANT_MLFLOW_PYTHON=~/.cache/sextant/venv/mlflow-3.17.2-.../bin/python node --test test/e2e/mlflow-links.test.mjs

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { launch, screenshot, sextantBin, startServer } from './harness.mjs';

const here = dirname(fileURLToPath(import.meta.url));

/** mlflowPython is $SEXTANT_MLFLOW_PYTHON, else the newest complete cached mlflow environment's python. */
function mlflowPython() {
  if (process.env.SEXTANT_MLFLOW_PYTHON) return process.env.SEXTANT_MLFLOW_PYTHON;
  const cache = process.env.SEXTANT_CACHE_DIR || join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'sextant');
  const dir = join(cache, 'venv');
  const envs = existsSync(dir)
    ? readdirSync(dir)
        .filter((d) => /^mlflow-\d/.test(d) && existsSync(join(dir, d, '.complete')))
        .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }))
    : [];
  if (envs.length === 0) throw new Error(`no mlflow environment: set SEXTANT_MLFLOW_PYTHON or run ./scripts/test.sh e2e once (it caches them in ${dir})`);
  return join(dir, envs[envs.length - 1], 'bin', 'python');
}

let srv;
let br;
let page;
const printed = {};

before(async () => {
  srv = await startServer();
  const r = spawnSync(
    sextantBin(),
    ['run', '--experiment', '/Shared/links', '--run-name', 'linked-run', '--gpu-source', 'none', '--', mlflowPython(), join(here, 'mlflow_links.py')],
    { env: { ...process.env, MLFLOW_TRACKING_URI: srv.url, MLFLOW_DISABLE_TELEMETRY: 'true', DO_NOT_TRACK: 'true' }, encoding: 'utf8', timeout: 240_000 },
  );
  const out = r.stdout + r.stderr;
  assert.equal(r.status, 0, 'sextant run with the mlflow client failed:\n' + out);
  const runLinks = [...out.matchAll(/View run (\S+) at: (\S+)/g)].map((m) => ({ name: m[1], url: m[2] }));
  printed.run = runLinks.find((l) => l.name === 'linked-run')?.url;
  printed.second = runLinks.find((l) => l.name === 'second-run')?.url;
  printed.experiment = /View experiment at: (\S+)/.exec(out)?.[1];
  printed.launcher = /sextant: view it at (\S+)/.exec(out)?.[1];
  const ids = /LINKS first=(\w+) second=(\w+) experiment=(\w+) model_version=(\w+)/.exec(out);
  assert.ok(printed.run && printed.second && printed.experiment && printed.launcher && ids, 'links missing from the output:\n' + out);
  [, printed.first, printed.secondId, printed.exp, printed.version] = ids;
  // The shapes the client prints, checked here so that a client that
  // changes them fails this test rather than passing unnoticed.
  assert.equal(printed.run, `${srv.url}/#/experiments/${printed.exp}/runs/${printed.first}`);
  assert.equal(printed.experiment, `${srv.url}/#/experiments/${printed.exp}`);
  assert.equal(printed.launcher, `${srv.url}/runs/${printed.first}`);
  br = await launch();
  page = br.page;
});

after(async () => {
  await br?.close();
  await srv?.stop();
});

/** open goes to url and waits for the Sextant page it lands on. */
async function open(url) {
  await page.goto(url);
  await page.waitForSelector('main#main > *');
  return new URL(page.url());
}

async function expectRunPage(url, tab) {
  const at = await open(url);
  assert.equal(at.pathname, '/runs/' + printed.first, url);
  assert.equal(at.hash, '');
  await page.waitForSelector('h1:has-text("linked-run")');
  // The breadcrumb names the experiment, not "Experiment 1".
  await page.waitForSelector('[data-testid=run-crumbs] a:has-text("links")');
  assert.match(await page.textContent('[data-testid=run-crumbs]'), /Shared\s*\/\s*links/);
  if (tab) assert.equal(await page.getAttribute(`[data-tab=${tab}]`, 'aria-selected'), 'true', url);
}

describe('links printed by the mlflow client and sextant run', () => {
  test("the client's run link opens the run, its breadcrumb naming the experiment", async () => {
    await expectRunPage(printed.run);
    await screenshot(page, 'mlflow-link-run');
  });

  test("the launcher's link opens the same run", async () => {
    await expectRunPage(printed.launcher);
  });

  test("the client's experiment link opens the experiment with both runs", async () => {
    const at = await open(printed.experiment);
    assert.equal(at.pathname, '/experiments/' + printed.exp);
    await page.waitForSelector('h1:has-text("/Shared/links")');
    await page.waitForSelector('.rt-row[data-run-id] >> text=second-run');
    await page.waitForSelector('.rt-row[data-run-id] >> text=linked-run');
    await screenshot(page, 'mlflow-link-experiment');
  });

  test("the second run's link opens the second run", async () => {
    const at = await open(printed.second);
    assert.equal(at.pathname, '/runs/' + printed.secondId);
    await page.waitForSelector('h1:has-text("second-run")');
  });
});

describe("the other shapes of MLflow's UI addresses", () => {
  const base = () => srv.url + '/#';
  test('run subpages open the run on the matching tab', async () => {
    const run = () => `${base()}/experiments/${printed.exp}/runs/${printed.first}`;
    await expectRunPage(run() + '/model-metrics', 'metrics');
    await expectRunPage(run() + '/system-metrics', 'system');
    await expectRunPage(run() + '/artifacts/model', 'artifacts');
    await expectRunPage(run() + '/overview', 'overview');
    await expectRunPage(`${base()}/runs/${printed.first}`, 'overview');
  });

  test('experiment tabs, searches and logged models open the experiment', async () => {
    for (const tail of ['/runs', '/traces', '/models', '/models/m-0123456789', '/overview', '/s?searchFilter=' + encodeURIComponent("attributes.run_name = 'second-run'")]) {
      const at = await open(`${base()}/experiments/${printed.exp}${tail}`);
      assert.equal(at.pathname, '/experiments/' + printed.exp, tail);
      await page.waitForSelector('h1:has-text("/Shared/links")');
    }
    // The search filter was taken over: only the second run is listed.
    await page.waitForFunction(() => document.querySelector('.runs-body')?.dataset.loaded === 'true');
    await page.waitForSelector('.rt-row[data-run-id] >> text=second-run');
    assert.equal(await page.locator('.rt-row[data-run-id] >> text=linked-run').count(), 0);
  });

  test('compare-runs and metric open the comparison of those runs', async () => {
    const runs = encodeURIComponent(JSON.stringify([printed.first, printed.secondId]));
    const exps = encodeURIComponent(JSON.stringify([printed.exp]));
    for (const url of [`${base()}/compare-runs?runs=${runs}&experiments=${exps}`, `${base()}/metric?runs=${runs}&metric=${encodeURIComponent('"loss"')}&experiments=${exps}&x_axis=step`]) {
      const at = await open(url);
      assert.equal(at.pathname, '/compare', url);
      await page.waitForSelector('h1:has-text("Compare 2 runs")');
      await page.waitForSelector('.params-diff a:has-text("linked-run")');
      await page.waitForSelector('.params-diff a:has-text("second-run")');
    }
    await screenshot(page, 'mlflow-link-compare');
  });

  test('the registry: the model, its version, the list', async () => {
    let at = await open(`${base()}/models/link-model`);
    assert.equal(at.pathname, '/models/link-model');
    await page.waitForSelector('[data-testid=model-name]:has-text("link-model")');
    await page.waitForSelector(`a[href="/runs/${printed.first}"]`);
    await page.waitForSelector('a:has-text("Version 1")');

    at = await open(`${base()}/models/link-model/versions/${printed.version}`);
    assert.equal(at.pathname, `/models/link-model/versions/${printed.version}`);
    await page.waitForSelector('[data-testid=model-name]:has-text("link-model")');
    // The version's run, by name.
    await page.waitForSelector(`a[href="/runs/${printed.first}"]:has-text("linked-run")`);
    await screenshot(page, 'mlflow-link-model-version');

    at = await open(`${base()}/models`);
    assert.equal(at.pathname, '/models');
    await page.waitForSelector('a[href="/models/link-model"]');
  });

  test('anything else lands on the workspace, never a blank page', async () => {
    for (const tail of ['/prompts', '/settings/general', '/experiments', '/some/future/page']) {
      const at = await open(base() + tail);
      assert.equal(at.pathname, '/', tail);
      await page.waitForSelector('h1:has-text("Workspace")');
    }
  });

  test('no page broke', () => {
    assert.deepEqual(br.problems, []);
  });
});
