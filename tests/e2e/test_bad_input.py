"""Bad input over raw HTTP: never a 5xx, always a JSON error whose message
names the problem; the server stays healthy afterwards."""

from __future__ import annotations

import json

import pytest
import requests
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from sextant_e2e import assert_healthy, assert_json_error

MAX_BODY = 65536
SEXTANT_SERVER_FLAGS = {"max_request_bytes": MAX_BODY}

MISSING_RUN = "0123456789abcdef0123456789abcdef"
INVALID = "INVALID_PARAMETER_VALUE"
NOT_FOUND = "RESOURCE_DOES_NOT_EXIST"


@pytest.fixture(scope="module")
def run_id(server):
    r = requests.post(server.api("/mlflow/experiments/create"), json={"name": "/Shared/bad-input"}, timeout=10)
    assert r.status_code == 200, r.text
    exp_id = r.json()["experiment_id"]
    r = requests.post(server.api("/mlflow/runs/create"), json={"experiment_id": exp_id}, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["run"]["info"]["run_id"]


def post(server, path, body=None, *, data=None, headers=None):
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    if data is None:
        data = json.dumps(body).encode()
    return requests.post(server.api(path), data=data, headers=h, timeout=30)


def get(server, path, params):
    return requests.get(server.api(path), params=params, timeout=30)


def history(server, run_id, key):
    r = get(server, "/mlflow/metrics/get-history", {"run_id": run_id, "metric_key": key})
    assert r.status_code == 200, r.text
    return r.json().get("metrics", [])


# ------------------------------------------------------------------ JSON and encoding


def test_malformed_json(server):
    r = post(server, "/mlflow/experiments/create", data=b'{"name": "x",')
    assert_json_error(r, 400, INVALID, "json")
    r = post(server, "/mlflow/experiments/create", data=b'{"name": "x"} trailing')
    assert_json_error(r, 400, INVALID)
    r = post(server, "/mlflow/runs/log-batch", data=b"[1, 2, 3]")
    assert_json_error(r, 400, INVALID)
    r = post(server, "/mlflow/runs/create", data=b"{'experiment_id': '0'}")
    assert_json_error(r, 400, INVALID, "json")


def test_wrong_content_type(server):
    r = post(server, "/mlflow/experiments/create", {"name": "/Shared/ct"}, headers={"Content-Type": "text/plain"})
    assert_json_error(r, 400, INVALID, "content-type")


@pytest.mark.parametrize("path,body,field", [
    ("/mlflow/experiments/create", {"name": 5}, "name"),
    ("/mlflow/runs/create", {"experiment_id": 5}, "experiment_id"),
    ("/mlflow/runs/create", {"experiment_id": "0", "start_time": "yesterday"}, "start_time"),
    ("/mlflow/runs/create", {"experiment_id": "0", "tags": {"k": "v"}}, "tags"),
    ("/mlflow/runs/log-parameter", {"run_id": "RUN", "key": "p", "value": 5}, "value"),
    ("/mlflow/runs/set-tag", {"run_id": "RUN", "key": "t", "value": True}, "value"),
    ("/mlflow/runs/log-metric", {"run_id": "RUN", "key": "m", "value": 1, "timestamp": "soon"}, "timestamp"),
    ("/mlflow/runs/log-metric", {"run_id": "RUN", "key": "m", "value": 1, "timestamp": 1, "step": 1.5}, "step"),
    ("/mlflow/runs/log-batch", {"run_id": "RUN", "metrics": {"key": "m"}}, "metrics"),
    ("/mlflow/runs/log-batch", {"run_id": "RUN", "params": [{"key": "p", "value": 1}]}, "value"),
    ("/mlflow/runs/update", {"run_id": "RUN", "status": "DONE"}, "status"),
    ("/mlflow/runs/search", {"experiment_ids": "0"}, "experiment_ids"),
    ("/mlflow/runs/search", {"experiment_ids": ["0"], "max_results": "many"}, "max_results"),
])
def test_wrong_types(server, run_id, path, body, field):
    body = json.loads(json.dumps(body).replace('"RUN"', json.dumps(run_id)))
    r = post(server, path, body)
    assert_json_error(r, 400, INVALID, field)


def test_missing_required_fields(server, run_id):
    assert_json_error(post(server, "/mlflow/experiments/create", {}), 400, INVALID, "name")
    assert_json_error(post(server, "/mlflow/runs/log-metric", {"run_id": run_id, "key": "m", "timestamp": 1}),
                      400, INVALID, "value")
    assert_json_error(post(server, "/mlflow/runs/log-metric", {"run_id": run_id, "key": "m", "value": 1}),
                      400, INVALID, "timestamp")
    assert_json_error(post(server, "/mlflow/runs/log-parameter", {"run_id": run_id, "key": "p"}), 400, INVALID,
                      "value")
    assert_json_error(post(server, "/mlflow/runs/log-batch",
                           {"run_id": run_id, "metrics": [{"key": "m", "value": 1}]}), 400, INVALID,
                      "timestamp")
    assert_json_error(get(server, "/mlflow/runs/get", {}), 400, INVALID, "run_id")


def test_param_and_tag_without_value(server, run_id):
    # log-parameter, set-tag and log-batch agree: no value is a 400 naming
    # the field (MLflow's server would store ""; its client always sends
    # the field, see the next test).
    for path, body, field in [
        ("/mlflow/runs/log-parameter", {"run_id": run_id, "key": "nv"}, "value"),
        ("/mlflow/runs/set-tag", {"run_id": run_id, "key": "nv"}, "value"),
        ("/mlflow/runs/log-batch", {"run_id": run_id, "params": [{"key": "nv"}]}, "params[0].value"),
        ("/mlflow/runs/log-batch", {"run_id": run_id, "tags": [{"key": "nv", "value": None}]}, "tags[0].value"),
    ]:
        assert_json_error(post(server, path, body), 400, INVALID, f"'{field}'")
    data = get(server, "/mlflow/runs/get", {"run_id": run_id}).json()["run"]["data"]
    assert not [kv for kv in data.get("params", []) + data.get("tags", []) if kv["key"] == "nv"], data


def test_empty_values_from_the_client(server):
    from mlflow.entities import Param, RunTag

    client = MlflowClient(server.url)
    run_id = client.create_run(client.create_experiment("/Shared/empty-values")).info.run_id
    client.log_param(run_id, "empty_p1", "")
    client.set_tag(run_id, "empty_t1", "")
    client.log_batch(run_id, params=[Param("empty_p2", "")], tags=[RunTag("empty_t2", "")])
    data = client.get_run(run_id).data
    assert data.params["empty_p1"] == "" and data.params["empty_p2"] == ""
    assert data.tags["empty_t1"] == "" and data.tags["empty_t2"] == ""


def test_url_over_limit(server):
    # net/http answers a request line and headers over 1 MiB before any
    # handler runs; the answer is still a JSON error naming the limit.
    import socket
    import threading

    target = "/api/2.0/mlflow/experiments/get?experiment_id=" + "1" * (2 << 20)
    s = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    try:
        threading.Thread(target=lambda: _send_quietly(s, f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode()), daemon=True).start()
        f = s.makefile("rb")
        status_line = f.readline().decode()
        headers = {}
        while (line := f.readline().decode().strip()):
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        body = json.loads(f.read(int(headers["content-length"])))
    finally:
        s.close()
    assert status_line.split()[1] == "431" and headers["content-type"] == "application/json", (status_line, headers)
    assert body["error_code"] == "RESOURCE_LIMIT_EXCEEDED" and "1048576 bytes" in body["message"], body


def _send_quietly(sock, data: bytes) -> None:
    try:
        sock.sendall(data)
    except OSError:
        pass  # the server stops reading at the limit and closes


def test_unknown_field_in_post_body(server):
    name = "/Shared/unknown-field"
    r = post(server, "/mlflow/experiments/create", {"name": name, "bogus_field": 1})
    assert_json_error(r, 400, INVALID, "bogus_field")
    # Nothing was created.
    r = get(server, "/mlflow/experiments/get-by-name", {"experiment_name": name})
    assert_json_error(r, 404, NOT_FOUND)


def test_unknown_query_parameter(server):
    r = get(server, "/mlflow/experiments/get", {"experiment_id": "0", "bogus_param": "1"})
    assert_json_error(r, 400, INVALID, "bogus_param")
    r = get(server, "/mlflow/metrics/get-history", {"run_id": MISSING_RUN, "metric_key": "m", "maxresults": "5"})
    assert_json_error(r, 400, INVALID, "maxresults")


def test_body_over_limit(server, run_id):
    big = {"run_id": run_id, "params": [{"key": f"p{i}", "value": "x" * 5000} for i in range(14)]}
    data = json.dumps(big).encode()
    assert len(data) > MAX_BODY
    r = post(server, "/mlflow/runs/log-batch", data=data)
    body = assert_json_error(r, 413, None, str(MAX_BODY))
    assert body["error_code"] != "INTERNAL_ERROR"
    r = get(server, "/mlflow/runs/get", {"run_id": run_id})
    assert "params" not in r.json()["run"]["data"], "the oversized batch was stored"
    # Just under the limit is accepted.
    ok = {"run_id": run_id, "params": [{"key": f"p{i}", "value": "y" * 5000} for i in range(12)]}
    data = json.dumps(ok).encode()
    assert len(data) < MAX_BODY
    r = post(server, "/mlflow/runs/log-batch", data=data)
    assert r.status_code == 200, r.text[:300]


def test_invalid_utf8(server, run_id):
    r = post(server, "/mlflow/experiments/create", data=b'{"name": "/Shared/bad-\xff\xfe-utf8"}')
    assert_json_error(r, 400, INVALID, "utf-8")
    r = post(server, "/mlflow/runs/set-tag", data=b'{"run_id": "%s", "key": "t", "value": "\xc3\x28"}' % run_id.encode())
    assert_json_error(r, 400, INVALID, "utf-8")
    r = requests.get(server.api("/mlflow/experiments/get-by-name") + "?experiment_name=%FF%FE", timeout=10)
    assert_json_error(r, 400, INVALID, "utf-8")
    # Valid non-ASCII is fine.
    r = post(server, "/mlflow/runs/set-tag", {"run_id": run_id, "key": "t", "value": "grüße ✓ 日本"})
    assert r.status_code == 200, r.text
    r = get(server, "/mlflow/runs/get", {"run_id": run_id})
    assert {"key": "t", "value": "grüße ✓ 日本"} in r.json()["run"]["data"]["tags"]


# ------------------------------------------------------------------ metric values, steps, timestamps


def test_metric_value_strings(server, run_id):
    for i, v in enumerate(["NaN", "Infinity", "-Infinity"]):
        r = post(server, "/mlflow/runs/log-metric",
                 {"run_id": run_id, "key": f"special{i}", "value": v, "timestamp": 1000, "step": 0})
        assert r.status_code == 200, (v, r.text)
        (m,) = history(server, run_id, f"special{i}")
        assert m["value"] == v, f"{v!r} came back as {m['value']!r}"
    r = post(server, "/mlflow/runs/log-metric", {"run_id": run_id, "key": "bad", "value": "abc", "timestamp": 1000})
    assert_json_error(r, 400, INVALID, "value")
    r = post(server, "/mlflow/runs/log-batch",
             {"run_id": run_id, "metrics": [{"key": "bad", "value": "abc", "timestamp": 1000, "step": 0}]})
    assert_json_error(r, 400, INVALID, "value")
    r = post(server, "/mlflow/runs/log-metric", {"run_id": run_id, "key": "bad", "value": True, "timestamp": 1000})
    assert_json_error(r, 400, INVALID, "value")
    assert history(server, run_id, "bad") == []


def test_steps_and_timestamps(server, run_id):
    def log(step, ts=1000, key="s"):
        return post(server, "/mlflow/runs/log-metric",
                    {"run_id": run_id, "key": key, "value": 1.0, "timestamp": ts, "step": step})

    assert_json_error(log(-(2 ** 53)), 400, INVALID, "step")
    assert_json_error(log(2 ** 53), 400, INVALID, "step")
    assert_json_error(log(2 ** 53 + 1), 400, INVALID, "step")
    assert_json_error(log(2 ** 64), 400, INVALID, "step")
    assert_json_error(log(0, ts=-1), 400, INVALID, "timestamp")
    assert history(server, run_id, "s") == []
    # The largest accepted step round-trips exactly; a step given as a string is accepted.
    r = log(2 ** 53 - 1)
    assert r.status_code == 200, r.text
    r = log("42")
    assert r.status_code == 200, r.text
    steps = sorted(int(m["step"]) for m in history(server, run_id, "s"))
    assert steps == [42, 2 ** 53 - 1]
    # A step out of range inside a batch: refused, and nothing of the batch
    # stored (negative steps are valid, as in MLflow).
    r = post(server, "/mlflow/runs/log-batch", {"run_id": run_id, "metrics": [
        {"key": "b", "value": 1, "timestamp": 1, "step": -5},
        {"key": "b", "value": 1, "timestamp": 1, "step": -(2 ** 53)}]})
    assert_json_error(r, 400, INVALID, "step")
    assert history(server, run_id, "b") == []


@pytest.mark.parametrize("key", ["a//b", "../up", "/abs", "trail/", "bad*char", "x" * 251, "./dot", "semi;colon"])
def test_invalid_keys(server, run_id, key):
    r = post(server, "/mlflow/runs/log-metric", {"run_id": run_id, "key": key, "value": 1, "timestamp": 1})
    assert_json_error(r, 400, INVALID)
    r = post(server, "/mlflow/runs/log-parameter", {"run_id": run_id, "key": key, "value": "v"})
    assert_json_error(r, 400, INVALID)
    r = post(server, "/mlflow/runs/set-tag", {"run_id": run_id, "key": key, "value": "v"})
    assert_json_error(r, 400, INVALID)


def test_valid_unusual_keys_and_long_values(server, run_id):
    keys = ["train/loss", "a b", "x:y", "dash-and_under.score", "x" * 250, "ünï"]
    for k in keys:
        r = post(server, "/mlflow/runs/log-metric", {"run_id": run_id, "key": k, "value": 1, "timestamp": 1})
        assert r.status_code == 200, (k, r.text)
    r = post(server, "/mlflow/runs/log-parameter", {"run_id": run_id, "key": "long", "value": "v" * 6000})
    assert r.status_code == 200, r.text
    r = post(server, "/mlflow/runs/set-tag", {"run_id": run_id, "key": "long", "value": "t" * 8000})
    assert r.status_code == 200, r.text
    run = get(server, "/mlflow/runs/get", {"run_id": run_id}).json()["run"]
    assert {m["key"] for m in run["data"]["metrics"]} >= set(keys)
    assert {"key": "long", "value": "v" * 6000} in run["data"]["params"]
    assert {"key": "long", "value": "t" * 8000} in run["data"]["tags"]


# The same metric JSON, sent through log-metric and inside a log-batch, must
# get the same answer and store the same point (the two endpoints decode
# separately). Each entry: (metric object as raw JSON text, accepted?).
METRIC_OBJECTS = [
    ('{"key":"m","value":1.5,"timestamp":1,"step":2}', True),
    ('{"key":"m","value":"1.5","timestamp":"1","step":"2"}', True),
    ('{"key":"m","value":"NaN","timestamp":1}', True),
    ('{"key":"m","value":"-Infinity","timestamp":1}', True),
    ('{"key":"m","value":-0.0,"timestamp":1}', True),
    ('{"key":"m","value":5e-324,"timestamp":1}', True),
    ('{"key":"m","value":1E+2,"timestamp":1}', True),
    ('{"key":"m","value":1,"timestamp":1e3}', True),
    ('{"key":"m","value":1,"timestamp":1,"step":null}', True),
    ('{"key":"a\\u0062","value":1,"timestamp":1}', True),
    ('{ "key" : "m" ,\n "value" : 2 , "timestamp" : 3 , "step" : 4 }', True),
    ('{"key":"m","value":1,"timestamp":1,"model_id":"m-1","dataset_name":"d","dataset_digest":"x"}', True),
    ('{"key":"m","value":1,"timestamp":1.5}', False),
    ('{"key":"m","value":null,"timestamp":1}', False),
    ('{"key":"m","value":true,"timestamp":1}', False),
    ('{"key":"m","value":[1],"timestamp":1}', False),
    ('{"key":"m","value":{},"timestamp":1}', False),
    ('{"key":"m","value":"abc","timestamp":1}', False),
    ('{"key":"m","value":1,"timestamp":1,"bogus":1}', False),
    ('{"key":"m","value":1,"timestamp":1,"step":9007199254740992}', False),
    ('{"key":"m","value":1,"timestamp":1,"step":"0x10"}', False),
    ('{"key":"m","value":1,"timestamp":-1}', False),
    ('{"key":5,"value":1,"timestamp":1}', False),
    ('{"key":"m\\n","value":1,"timestamp":1}', False),
    ('{"key":"m","value":01,"timestamp":1}', False),
    ('{"key":"m","value":1.,"timestamp":1}', False),
    ('{"key":"m","value":.5,"timestamp":1}', False),
    ('{"key":"m","value":+1,"timestamp":1}', False),
    ('{"key":"m","value":NaN,"timestamp":1}', False),
    ('{"key":"m","value":1,"timestamp":1,}', False),
]


@pytest.mark.parametrize("obj,accepted", METRIC_OBJECTS, ids=[o for o, _ in METRIC_OBJECTS])
def test_log_metric_and_log_batch_decode_alike(server, obj, accepted):
    r = get(server, "/mlflow/experiments/get-by-name", {"experiment_name": "/Shared/bad-input"})
    exp_id = r.json()["experiment"]["experiment_id"]
    runs = [post(server, "/mlflow/runs/create", {"experiment_id": exp_id}).json()["run"]["info"]["run_id"]
            for _ in range(2)]
    single = post(server, "/mlflow/runs/log-metric", data=('{"run_id":"%s",%s' % (runs[0], obj[1:])).encode())
    batch = post(server, "/mlflow/runs/log-batch",
                 data=('{"run_id":"%s","metrics":[%s]}' % (runs[1], obj)).encode())
    for r in (single, batch):
        if accepted:
            assert r.status_code == 200, f"{r.request.url}: {r.text}"
        else:
            assert_json_error(r, 400, INVALID)
    assert single.status_code == batch.status_code
    stored = [get(server, "/mlflow/runs/get", {"run_id": rid}).json()["run"]["data"].get("metrics", [])
              for rid in runs]
    assert stored[0] == stored[1], f"log-metric stored {stored[0]}, log-batch stored {stored[1]}"
    if accepted:
        assert len(stored[0]) == 1


ODD_VALUES = ["plain", "", "é ✓ 😀", "a\x00b", "tab\tnew\nline", "\\back\\", '"q"', "<&>", "\u2028"]


@pytest.mark.parametrize("idx", range(len(ODD_VALUES)), ids=[repr(v) for v in ODD_VALUES])
def test_param_and_tag_values_round_trip(server, run_id, idx):
    value = ODD_VALUES[idx]
    key = f"odd{idx}"
    r1 = post(server, "/mlflow/runs/log-parameter", {"run_id": run_id, "key": key, "value": value})
    r2 = post(server, "/mlflow/runs/log-batch", {"run_id": run_id, "tags": [{"key": key, "value": value}]})
    for r in (r1, r2):
        if r.status_code != 200:  # refusing is acceptable; corrupting is not
            assert_json_error(r, 400, INVALID)
    data = get(server, "/mlflow/runs/get", {"run_id": run_id}).json()["run"]["data"]
    if r1.status_code == 200:
        assert {"key": key, "value": value} in data["params"], [p for p in data["params"] if p["key"] == key]
    if r2.status_code == 200:
        assert {"key": key, "value": value} in data["tags"], [t for t in data["tags"] if t["key"] == key]


# ------------------------------------------------------------------ missing resources


def test_unknown_run_and_experiment(server):
    assert_json_error(get(server, "/mlflow/runs/get", {"run_id": MISSING_RUN}), 404, NOT_FOUND)
    r = post(server, "/mlflow/runs/log-metric", {"run_id": MISSING_RUN, "key": "m", "value": 1, "timestamp": 1})
    assert_json_error(r, 404, NOT_FOUND)
    r = post(server, "/mlflow/runs/log-batch", {"run_id": MISSING_RUN, "params": [{"key": "p", "value": "v"}]})
    assert_json_error(r, 404, NOT_FOUND)
    r = post(server, "/mlflow/runs/update", {"run_id": MISSING_RUN, "status": "FINISHED"})
    assert_json_error(r, 404, NOT_FOUND)
    r = post(server, "/mlflow/runs/delete", {"run_id": MISSING_RUN})
    assert_json_error(r, 404, NOT_FOUND)
    assert_json_error(get(server, "/mlflow/experiments/get", {"experiment_id": "987654"}), 404, NOT_FOUND)
    r = get(server, "/mlflow/experiments/get-by-name", {"experiment_name": "/Users/nobody/none"})
    assert_json_error(r, 404, NOT_FOUND)
    r = post(server, "/mlflow/runs/create", {"experiment_id": "987654"})
    assert_json_error(r, 404, NOT_FOUND)
    r = post(server, "/mlflow/experiments/delete", {"experiment_id": "987654"})
    assert_json_error(r, 404, NOT_FOUND)
    # Malformed ids are 400, not 404 or 500.
    assert_json_error(get(server, "/mlflow/runs/get", {"run_id": "../../etc/passwd"}), 400, INVALID)
    assert_json_error(get(server, "/mlflow/experiments/get", {"experiment_id": "1; DROP TABLE runs"}), 400, INVALID)


def test_client_get_run_missing(server):
    with pytest.raises(MlflowException) as ei:
        MlflowClient(server.url).get_run(MISSING_RUN)
    assert ei.value.error_code == NOT_FOUND, str(ei.value)


# ------------------------------------------------------------------ search input


@pytest.mark.parametrize("flt,mention", [
    ("metrics.loss <", "position"),
    ("params.x = 1 OR params.y = 2", "OR"),
    ("foo.bar = 'x'", "foo"),
    ("metrics.loss = 'abc'", "position"),
    ("params.lr > 'a'", "position"),
    ("attributes.status = 'FINISHED' AND", "position"),
    ("tags.`unterminated = 'x'", "position"),
    ("metrics.loss == 1", "position"),
])
def test_bad_run_filters(server, flt, mention):
    r = post(server, "/mlflow/runs/search", {"experiment_ids": ["0"], "filter": flt})
    assert_json_error(r, 400, INVALID, mention)


def test_bad_experiment_filters_and_orders(server):
    r = post(server, "/mlflow/experiments/search", {"filter": "name LIKE", "max_results": 10})
    assert_json_error(r, 400, INVALID)
    r = post(server, "/mlflow/experiments/search", {"filter": "colour = 'red'", "max_results": 10})
    assert_json_error(r, 400, INVALID, "colour")
    r = post(server, "/mlflow/runs/search", {"experiment_ids": ["0"], "order_by": ["metrics.loss SIDEWAYS"]})
    assert_json_error(r, 400, INVALID)
    r = post(server, "/mlflow/runs/search", {"experiment_ids": ["0"], "order_by": ["nonsense.key"]})
    assert_json_error(r, 400, INVALID, "nonsense")


def test_bad_max_results(server):
    for n in (0, -1, 50001):
        r = post(server, "/mlflow/runs/search", {"experiment_ids": ["0"], "max_results": n})
        assert_json_error(r, 400, INVALID, "max_results")
    r = post(server, "/mlflow/experiments/search", {"max_results": 0})
    assert_json_error(r, 400, INVALID, "max_results")


def test_invalid_page_tokens(server, run_id):
    for tok in ("garbage!!", "eyJvZmZzZXQiOiAtNX0=", "AAAA"):
        r = post(server, "/mlflow/runs/search", {"experiment_ids": ["0"], "page_token": tok})
        assert_json_error(r, 400, INVALID, "page_token")
        r = post(server, "/mlflow/experiments/search", {"max_results": 5, "page_token": tok})
        assert_json_error(r, 400, INVALID, "page_token")
        r = get(server, "/mlflow/metrics/get-history", {"run_id": run_id, "metric_key": "m", "page_token": tok})
        assert_json_error(r, 400, INVALID, "page_token")


def test_bulk_interval_bad_arguments(server, run_id):
    url = server.url + "/ajax-api/2.0/mlflow/metrics/get-history-bulk-interval"
    r = requests.get(url, params={"run_ids": run_id, "metric_key": "m", "start_step": 5}, timeout=10)
    assert_json_error(r, 400, INVALID, "step")
    r = requests.get(url, params={"run_ids": run_id, "metric_key": "m", "start_step": 9, "end_step": 2}, timeout=10)
    assert_json_error(r, 400, INVALID, "step")
    r = requests.get(url, params={"run_ids": run_id, "metric_key": "m", "max_results": 2501}, timeout=10)
    assert_json_error(r, 400, INVALID, "max_results")
    r = requests.get(url, params=[("run_ids", MISSING_RUN[:-3] + f"{i:03d}") for i in range(101)] + [
        ("metric_key", "m")], timeout=10)
    assert_json_error(r, 400, None, "100")
    r = requests.get(url, params={"metric_key": "m"}, timeout=10)
    assert_json_error(r, 400, INVALID, "run_ids")


# ------------------------------------------------------------------ after all of that


def test_zz_server_still_healthy(server, run_id):
    assert_healthy(server)
    r = get(server, "/mlflow/runs/get", {"run_id": run_id})
    assert r.status_code == 200
    log = server.log_path.read_text(errors="replace")
    assert "panic" not in log.lower(), "the server logged a panic"
