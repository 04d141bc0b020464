"""Golden files of the MLflow JSON both ways: the requests the real mlflow
client sends and the answers it accepts, recorded from the client under the
e2e suite and replayed by a fast Go test (internal/httpapi/golden_test.go).

A Recorder wraps requests' transport while a scenario runs, so it sees the
bytes the client sends and receives. Values that change from one run to the
next are normalised as the Go test normalises them:

- ids the server makes (run and logged-model ids: the values of ID_KEYS)
  become "<id:N>", numbered by first appearance, wherever they occur (paths,
  query strings, artifact URIs);
- timestamps (the values of TIME_KEYS, client's or server's) become "<time>".

A golden file is JSON: {"mlflow": version, "exchanges": [{"method", "path",
"query", "request", "status", "response"}]}, request and response being the
normalised JSON bodies (null when empty). Keep the normalisation in step
with normalizer in golden_test.go.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import requests

from sextant_e2e import REPO_ROOT

GOLDEN_DIR = REPO_ROOT / "internal" / "httpapi" / "testdata" / "mlflow"

ID_KEYS = {"run_id", "run_uuid", "model_id", "source_run_id"}
TIME_KEYS = {"start_time", "end_time", "creation_time", "last_update_time", "creation_timestamp",
             "last_updated_timestamp", "timestamp", "last_updated_time", "creation_timestamp_ms",
             "last_updated_timestamp_ms"}
ID_SHAPE = re.compile(r"^(?:[0-9a-f]{32}|m-[0-9a-f]{32})$")


class Normalizer:
    """Replaces ids and timestamps; ids are numbered by first appearance."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}

    def learn(self, v) -> None:
        """Registers the ids in a JSON value (its ID_KEYS' values)."""
        if isinstance(v, dict):
            for k, x in v.items():
                if k in ID_KEYS and isinstance(x, str) and ID_SHAPE.match(x) and x not in self.ids:
                    self.ids[x] = f"<id:{len(self.ids) + 1}>"
                self.learn(x)
        elif isinstance(v, list):
            for x in v:
                self.learn(x)

    def text(self, s: str) -> str:
        for real, ph in self.ids.items():
            s = s.replace(real, ph)
        return s

    def value(self, v, key: str = ""):
        if isinstance(v, dict):
            return {k: self.value(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [self.value(x, key) for x in v]
        if key in TIME_KEYS and v is not None and not isinstance(v, bool):
            return "<time>"
        if isinstance(v, str):
            return self.text(v)
        return v


def _json(body):
    if body is None or body in (b"", ""):
        return None
    if isinstance(body, bytes):
        body = body.decode("utf-8")
    return json.loads(body)


class Recorder:
    """Records the client's exchanges with the server at base_url."""

    def __init__(self, base_url: str) -> None:
        self.base = base_url.rstrip("/")
        self.raw: list[tuple] = []
        self._orig = None

    def __enter__(self) -> "Recorder":
        orig = requests.adapters.HTTPAdapter.send
        rec = self

        def send(adapter, request, *args, **kwargs):
            resp = orig(adapter, request, *args, **kwargs)
            if request.url.startswith(rec.base + "/"):
                rec.raw.append((request.method, request.url, request.body, resp.status_code, resp.content))
            return resp

        self._orig = orig
        requests.adapters.HTTPAdapter.send = send
        return self

    def __exit__(self, *exc) -> None:
        requests.adapters.HTTPAdapter.send = self._orig

    def exchanges(self) -> list[dict]:
        """The recorded exchanges, normalised."""
        n = Normalizer()
        out = []
        for method, url, body, status, content in self.raw:
            u = urlsplit(url)
            req, resp = _json(body), _json(content)
            # An id is learnt where the server makes it (an answer) or
            # where the client first names it (a request).
            n.learn(req)
            n.learn(resp)
            query = [(k, n.text(v)) for k, v in parse_qsl(u.query, keep_blank_values=True)]
            query = [(k, "<time>" if k in TIME_KEYS else v) for k, v in query]
            out.append({
                "method": method,
                "path": n.text(u.path),
                "query": urlencode(query),
                "request": n.value(req),
                "status": status,
                "response": n.value(resp),
            })
        return out


def golden_path(version: str, scenario: str) -> Path:
    return GOLDEN_DIR / version / f"{scenario}.json"


def write_golden(path: Path, version: str, exchanges: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mlflow": version, "exchanges": exchanges}, indent=1, sort_keys=True,
                               ensure_ascii=False) + "\n", encoding="utf-8")


def read_golden(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["exchanges"]
