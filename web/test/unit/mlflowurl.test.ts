import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mlflowHashRoute } from '../../src/lib/mlflowurl';

const RUN = '0123456789abcdef0123456789abcdef';

test('the links the mlflow client prints open the run and the experiment', () => {
  assert.equal(mlflowHashRoute(`#/experiments/7/runs/${RUN}`), `/runs/${RUN}`);
  assert.equal(mlflowHashRoute('#/experiments/7'), '/experiments/7');
  // With a workspace (MLflow 3.x multi-workspace servers).
  assert.equal(mlflowHashRoute(`#/experiments/7/runs/${RUN}?workspace=team`), `/runs/${RUN}`);
  assert.equal(mlflowHashRoute('#/experiments/7?workspace=team'), '/experiments/7');
  // mlflow.genai.evaluate's results, and `mlflow demo`.
  assert.equal(mlflowHashRoute(`#/experiments/7/evaluation-runs?selectedRunUuid=${RUN}`), `/runs/${RUN}`);
  assert.equal(mlflowHashRoute('#/experiments/7/overview'), '/experiments/7');
});

test('run subpages open the matching tab', () => {
  assert.equal(mlflowHashRoute(`#/experiments/7/runs/${RUN}/model-metrics`), `/runs/${RUN}?tab=metrics`);
  assert.equal(mlflowHashRoute(`#/experiments/7/runs/${RUN}/system-metrics`), `/runs/${RUN}?tab=system`);
  assert.equal(mlflowHashRoute(`#/experiments/7/runs/${RUN}/artifacts/model/MLmodel`), `/runs/${RUN}?tab=artifacts`);
  assert.equal(mlflowHashRoute(`#/experiments/7/runs/${RUN}/artifactPath/a/b`), `/runs/${RUN}?tab=artifacts`);
  assert.equal(mlflowHashRoute(`#/experiments/7/runs/${RUN}/traces`), `/runs/${RUN}`);
  assert.equal(mlflowHashRoute(`#/runs/${RUN}`), `/runs/${RUN}`);
});

test('experiment tabs, searches and logged models open the experiment', () => {
  for (const tab of ['runs', 'traces', 'models', 'models/m-123', 'models/m-123/artifacts', 'datasets', 'chat-sessions', 's', 'evaluation-runs']) {
    assert.equal(mlflowHashRoute('#/experiments/12/' + tab), '/experiments/12', tab);
  }
  assert.equal(mlflowHashRoute("#/experiments/12?searchFilter=metrics.loss%20%3C%200.1"), '/experiments/12?filter=metrics.loss%20%3C%200.1');
});

test('compare and metric pages open the comparison', () => {
  const q = encodeURIComponent(JSON.stringify(['a1', 'b2']));
  assert.equal(mlflowHashRoute(`#/compare-runs?runs=${q}&experiments=${encodeURIComponent('["1"]')}`), '/compare?runs=a1,b2');
  assert.equal(mlflowHashRoute('#/compare-runs?runs=["a1","b2"]&experiments=["1"]'), '/compare?runs=a1,b2');
  assert.equal(mlflowHashRoute(`#/metric?runs=${q}&metric=%22loss%22&experiments=["1"]`), '/compare?runs=a1,b2');
  assert.equal(mlflowHashRoute(`#/metric/loss?runs=["${RUN}"]&metric="loss"`), `/runs/${RUN}?tab=metrics`);
  assert.equal(mlflowHashRoute('#/compare-runs?runs=[]&experiments=["4"]'), '/experiments/4');
  assert.equal(mlflowHashRoute('#/compare-experiments/s?experiments=["3","4"]'), '/experiments/3');
});

test('the model registry opens the model pages', () => {
  assert.equal(mlflowHashRoute('#/models'), '/models');
  assert.equal(mlflowHashRoute('#/models/my%20model'), '/models/my%20model');
  assert.equal(mlflowHashRoute('#/models/clf/versions/3'), '/models/clf/versions/3');
  assert.equal(mlflowHashRoute('#/models/clf/versions/3/serving'), '/models/clf/versions/3');
});

test('anything else opens the workspace; non-MLflow hashes are left alone', () => {
  assert.equal(mlflowHashRoute('#/'), '/');
  assert.equal(mlflowHashRoute('#/prompts/p1'), '/');
  assert.equal(mlflowHashRoute('#/settings'), '/');
  assert.equal(mlflowHashRoute('#/experiments'), '/');
  assert.equal(mlflowHashRoute('#section-2'), null);
  assert.equal(mlflowHashRoute(''), null);
});

test('ids are escaped into the path', () => {
  assert.equal(mlflowHashRoute('#/experiments/1%2F..%2Fx'), '/experiments/1%2F..%2Fx');
  assert.equal(mlflowHashRoute('#/runs/<script>'), '/runs/%3Cscript%3E');
});
