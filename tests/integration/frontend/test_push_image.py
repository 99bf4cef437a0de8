"""The push-service image (functions/frontend/push/Dockerfile): linted by hadolint, unprivileged, with the front
end's requirements, and run by template.yaml's push task as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ferrymq.infra import template as cfn
from tests.support.dockerfile import PUSH_DOCKERFILE, exec_form, final_stage, hadolint, instructions


def test_the_push_dockerfile_is_clean_by_hadolint() -> None:
    run = subprocess.run([hadolint(), str(PUSH_DOCKERFILE)], capture_output=True, text=True, timeout=60,
                         check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_hadolint_refuses_the_push_dockerfile_running_as_root(tmp_path: Path) -> None:
    rooted = PUSH_DOCKERFILE.read_text().replace("USER 10001:10001", "USER root")
    (tmp_path / "Dockerfile").write_text(rooted)
    run = subprocess.run([hadolint(), str(tmp_path / "Dockerfile")], capture_output=True, text=True, timeout=60,
                         check=False)
    assert run.returncode != 0 and "DL3002" in run.stdout


def test_the_image_installs_the_front_end_s_requirements_and_runs_the_push_host_unprivileged() -> None:
    copies = [rest for keyword, rest in instructions(PUSH_DOCKERFILE) if keyword == "COPY"]
    assert "layers/ferrymq/requirements.txt layers/ferrymq/requirements.txt" in copies
    runs = " ".join(rest for keyword, rest in instructions(PUSH_DOCKERFILE) if keyword == "RUN")
    assert "--requirement layers/ferrymq/requirements.txt" in runs
    stage = dict(final_stage(PUSH_DOCKERFILE))
    assert stage["USER"].split(":")[0] not in ("0", "root")
    assert stage["FROM"].endswith("PYTHON_IMAGE}") and "slim" in dict(instructions(PUSH_DOCKERFILE))["ARG"]
    assert exec_form("ENTRYPOINT", PUSH_DOCKERFILE) == ["python", "-m", "ferrymq.frontend.push"]
    assert stage["STOPSIGNAL"] == "SIGTERM"


def test_the_push_task_runs_the_image_s_command_and_health_check() -> None:
    (container,) = cfn.load()["Resources"]["PushTask"]["Properties"]["ContainerDefinitions"]
    assert container["Command"] == exec_form("CMD", PUSH_DOCKERFILE)
    assert container["HealthCheck"]["Command"] == ["CMD", *exec_form("HEALTHCHECK", PUSH_DOCKERFILE)]
    assert container["User"] == dict(final_stage(PUSH_DOCKERFILE))["USER"]


def test_the_push_entry_point_s_arguments_are_accepted() -> None:
    # The image's CMD parses as python -m ferrymq.frontend.push's arguments (--help stops before any AWS call).
    run = subprocess.run([sys.executable, "-m", "ferrymq.frontend.push", *exec_form("CMD", PUSH_DOCKERFILE),
                          "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0 and "--metrics-port" in run.stdout, run.stderr
