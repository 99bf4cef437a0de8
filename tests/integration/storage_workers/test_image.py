"""The storage-worker image (storage_workers/Dockerfile): linted, and its contents run as the image would.

No container runtime runs here (``podman run`` stops at ``crun: setrlimit RLIMIT_NOFILE/RLIMIT_NPROC:
Operation not permitted``; see docs/design/deployable-shape.md), so the image's build is followed by hand: the
build stage's COPY lines copied from the repository, the project installed from them without dependencies
and the worker's requirements beside it (linked from this environment), then its ENTRYPOINT run with its ENV
in an interpreter without site-packages, its HEALTHCHECK command asked, and SIGTERM sent as ``docker stop``
sends STOPSIGNAL.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ferrymq.aws.clusters import ClusterRegistry
from ferrymq.infra import template as cfn
from ferrymq.settings import Settings
from tests.integration.conftest import REPO, worker_env
from tests.support.bundles import link_third_party, requirement_closure
from tests.support.dockerfile import DOCKERFILE, exec_form, final_stage, hadolint, image_env, instructions
from tests.support.ports import consecutive_free_ports
from tests.support.processes import terminate_group


def test_the_dockerfile_is_clean_by_hadolint() -> None:
    run = subprocess.run([hadolint(), str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_image_runs_the_worker_unprivileged_with_its_logs_on_a_volume() -> None:
    stage = dict(final_stage())
    user = stage["USER"].split(":")[0]
    assert user not in ("0", "root")
    assert json.loads(stage["VOLUME"]) == [image_env()["FERRYMQ_DATA_DIR"]]
    assert exec_form("ENTRYPOINT") == ["python", "-m", "ferrymq.storage"]
    assert "FERRYMQ_WORKER_ADMIN_PORT" in stage["HEALTHCHECK"] and "/health/live" in stage["HEALTHCHECK"]
    assert stage["STOPSIGNAL"] == "SIGTERM"


def test_hadolint_refuses_a_dockerfile_running_as_root(tmp_path: Path) -> None:
    # The lint is real: the image's own file with its USER line taken out is refused (DL3002 needs a USER root).
    rooted = DOCKERFILE.read_text().replace("USER 10001:10001", "USER root")
    (tmp_path / "Dockerfile").write_text(rooted)
    run = subprocess.run([hadolint(), str(tmp_path / "Dockerfile")], capture_output=True, text=True, timeout=60,
                         check=False)
    assert run.returncode != 0 and "DL3002" in run.stdout


@pytest.fixture(scope="module")
def image_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """site-packages as the image's build stage fills it: the COPY'd folders installed without dependencies,
    and the worker's requirements."""
    tmp_path = tmp_path_factory.mktemp("image")
    source = tmp_path / "src"
    source.mkdir()
    for keyword, rest in instructions():
        if keyword == "COPY" and not rest.startswith("--from"):
            *sources, _ = rest.split()
            for name in sources:
                path = REPO / name
                target = source / name
                target.parent.mkdir(parents=True, exist_ok=True)
                if path.is_dir():
                    shutil.copytree(path, target, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
                else:
                    shutil.copy2(path, target)
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target",
                    str(site), str(source)], check=True, timeout=300, capture_output=True)
    link_third_party(requirement_closure(REPO / "storage_workers" / "requirements.txt"), site)
    return site


def test_the_entry_point_serves_its_health_check_and_stops_cleanly_on_sigterm(image_root: Path,
                                                                              tmp_path: Path) -> None:
    # given the image's environment, with a data directory and free ports of the test's own
    port = consecutive_free_ports(2)
    env = {**image_env(), "PYTHONPATH": str(image_root), "PATH": os.environ["PATH"],
           "FERRYMQ_DATA_DIR": str(tmp_path / "data"), "FERRYMQ_WORKER_PORT": str(port),
           "FERRYMQ_WORKER_ADMIN_PORT": str(port + 1)}
    python = [sys.executable, "-S"]
    entry = exec_form("ENTRYPOINT")
    # when the entry point runs (a worker outside any cluster: nothing else to reach)
    worker = subprocess.Popen([*python, *entry[1:], "--no-register"], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert worker.stdout is not None
        ready = worker.stdout.readline()
        assert ready.startswith("FERRYMQ_WORKER_READY"), worker.stderr.read() if worker.stderr else ""
        # then the image's health check passes, on the address the worker published (auto: the machine's own)
        check = exec_form("HEALTHCHECK")
        health = subprocess.run([*python, *check[1:]], env=env, capture_output=True, text=True, timeout=30,
                                check=False)
        assert health.returncode == 0, health.stderr
        assert ready.split()[1] not in ("0.0.0.0", "auto")
        # and SIGTERM stops it cleanly
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
    finally:
        terminate_group(worker, 5)


def test_the_health_check_fails_when_nothing_answers(tmp_path: Path) -> None:
    port = consecutive_free_ports(1)
    env = {**image_env(), "FERRYMQ_WORKER_ADMIN_PORT": str(port)}
    health = subprocess.run([sys.executable, *exec_form("HEALTHCHECK")[1:]], env=env, capture_output=True,
                            timeout=30, check=False)
    assert health.returncode != 0


def test_the_task_s_cluster_init_runs_on_the_image_s_packages_and_is_idempotent(
        image_root: Path, aws_settings: Settings, tmp_path: Path) -> None:
    # given the image's environment against the test's DynamoDB, for a cluster of its own
    cluster = f"image-{uuid.uuid4().hex[:8]}"
    env = {**worker_env(aws_settings), **image_env(), "PYTHONPATH": str(image_root), "FERRYMQ_CLUSTER": cluster,
           "FERRYMQ_DATA_DIR": str(tmp_path / "data")}
    (template,) = [c for c in cfn.load()["Resources"]["WorkerTask0"]["Properties"]["ContainerDefinitions"]
                   if c["Name"] == "cluster-init"]
    command = [sys.executable, "-S", *template["EntryPoint"][1:]]
    # when the task's first container runs, twice
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    # then it names every partition's replica set, the same both times
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert first.stdout == again.stdout and lines and all(line.startswith(f"cluster {cluster} ") for line in lines)
    assert cluster in {info.name for info in ClusterRegistry.from_settings(aws_settings).all()}


def test_the_task_s_cluster_init_says_in_one_line_why_it_failed(image_root: Path, tmp_path: Path) -> None:
    port = consecutive_free_ports(1)
    env = {**image_env(), "PYTHONPATH": str(image_root), "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
           "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_MAX_ATTEMPTS": "1", "FERRYMQ_DATA_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-S", "-m", "ferrymq.infra.cluster_init"], env=env, capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode == 1
    assert run.stderr.startswith("ferrymq cluster init: ") and len(run.stderr.splitlines()) == 1
