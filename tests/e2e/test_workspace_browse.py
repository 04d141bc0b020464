"""Every experiment is findable by browsing the workspace from the root.

The README's quick start names its experiment /Users/alice@example.com/mnist
on a single-user server, where nobody created the folder
/Users/alice@example.com: the folder exists because the experiment lives
under it. Browsing "/" -> "/Users" -> "/Users/alice@example.com" with the
workspace list API reaches it; a folder cannot take an experiment's path
(nor an experiment a folder's); and once sign-in is on, such a folder is
shown to whoever can read something under it, and to nobody else.
"""

from __future__ import annotations

import mlflow
import requests

from sextant_e2e import admin_password, assert_json_error

README_EXPERIMENT = "/Users/alice@example.com/mnist"


def list_folders(srv, path: str, auth=None) -> requests.Response:
    return requests.get(srv.url + "/api/2.0/sextant/workspace/list", params={"path": path}, auth=auth, timeout=10)


def experiments_in(srv, folder: str, auth=None) -> list[str]:
    r = requests.post(srv.url + "/api/2.0/mlflow/experiments/search",
                      json={"filter": f"name LIKE '{folder}/%'", "max_results": 1000}, auth=auth, timeout=10)
    assert r.status_code == 200, r.text
    return [e["name"] for e in r.json().get("experiments", [])
            if "/" not in e["name"][len(folder) + 1:]]


def browse_to(srv, target: str, auth=None) -> None:
    """Walks from "/" down the folders of target, asserting each level lists the next."""
    parts = target.strip("/").split("/")
    here = "/"
    for part in parts[:-1]:
        nxt = here.rstrip("/") + "/" + part
        r = list_folders(srv, here, auth)
        assert r.status_code == 200, f"list {here}: {r.status_code} {r.text}"
        listed = [f["path"] for f in r.json()["folders"]]
        assert nxt in listed, f"browsing {here} does not show {nxt}: {listed}"
        here = nxt
    r = list_folders(srv, here, auth)
    assert r.status_code == 200, f"list {here}: {r.status_code} {r.text}"
    assert target in experiments_in(srv, here, auth)


def test_readme_experiment_is_reached_from_the_root(server, client):
    exp = mlflow.set_experiment(README_EXPERIMENT)
    with mlflow.start_run():
        mlflow.log_metric("loss", 0.5)
    assert exp.name == README_EXPERIMENT
    browse_to(server, README_EXPERIMENT)
    # `sextant run`'s default name, /Users/<user>/<entry>, and deeper paths too.
    mlflow.set_experiment("/Users/runner/train")
    mlflow.set_experiment("/Shared/team/vision/resnet")
    browse_to(server, "/Users/runner/train")
    browse_to(server, "/Shared/team/vision/resnet")
    # A folder that neither exists nor holds anything is still not found.
    assert_json_error(list_folders(server, "/Users/nobody@example.com"), 404, "RESOURCE_DOES_NOT_EXIST")


def test_folder_and_experiment_cannot_share_a_path(server, client):
    mlflow.set_experiment("/Shared/clash/exp")
    r = requests.post(server.url + "/api/2.0/sextant/workspace/mkdirs", json={"path": "/Shared/clash/exp"}, timeout=10)
    assert_json_error(r, 400, "RESOURCE_ALREADY_EXISTS", "/Shared/clash/exp", "experiment")
    r = requests.post(server.url + "/api/2.0/sextant/workspace/mkdirs", json={"path": "/Shared/clash/exp/sub"}, timeout=10)
    assert_json_error(r, 400, "RESOURCE_ALREADY_EXISTS", "/Shared/clash/exp", "experiment")
    r = requests.post(server.url + "/api/2.0/sextant/workspace/mkdirs", json={"path": "/Shared/made"}, timeout=10)
    assert r.status_code == 200, r.text
    r = requests.post(server.url + "/api/2.0/mlflow/experiments/create", json={"name": "/Shared/made"}, timeout=10)
    assert_json_error(r, 400, "RESOURCE_ALREADY_EXISTS", "/Shared/made", "folder")
    other = mlflow.set_experiment("/Shared/clash/other")
    r = requests.post(server.url + "/api/2.0/mlflow/experiments/update",
                      json={"experiment_id": other.experiment_id, "new_name": "/Shared/made"}, timeout=10)
    assert_json_error(r, 400, "RESOURCE_ALREADY_EXISTS", "/Shared/made", "folder")
    listed = [f["path"] for f in list_folders(server, "/Shared/clash").json()["folders"]]
    assert listed == [], listed
    assert sorted(experiments_in(server, "/Shared/clash")) == ["/Shared/clash/exp", "/Shared/clash/other"]


def test_implicit_folders_follow_permissions_after_sign_in(start_server, use_server, tmp_path):
    data = tmp_path / "data"
    single = start_server(data_dir=data)
    use_server(single)
    exp = mlflow.set_experiment(README_EXPERIMENT)
    single.stop_and_check()

    srv = start_server(data_dir=data, auth="on", admin_email="admin@example.com")
    admin = ("admin@example.com", admin_password(srv))
    r = requests.post(srv.url + "/api/2.0/sextant/users", json={"email": "bob@example.com", "password": "bob-password-1"}, auth=admin, timeout=10)
    assert r.status_code == 200, r.text
    bob = ("bob@example.com", "bob-password-1")

    browse_to(srv, README_EXPERIMENT, admin)
    # Bob can read nothing under alice's folder: it is not shown to him.
    listed = [f["path"] for f in list_folders(srv, "/Users", bob).json()["folders"]]
    assert "/Users/alice@example.com" not in listed and "/Users/bob@example.com" in listed, listed
    assert list_folders(srv, "/Users/alice@example.com", bob).status_code in (403, 404)
    # Given the experiment, he reaches it by browsing.
    r = requests.put(srv.url + "/api/2.0/sextant/permissions",
                     json={"resource": "experiment:" + exp.experiment_id, "principal": "bob@example.com", "level": "CAN_READ"},
                     auth=admin, timeout=10)
    assert r.status_code == 200, r.text
    browse_to(srv, README_EXPERIMENT, bob)
