"""Python environments made of links: what a requirements file brings (with its dependencies, no extras),
linked from this environment's installed distributions into a folder, as pip would install them there (the
Lambda layer, the storage-worker image), without downloading anything."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def requirement_closure(requirements: Path) -> set[str]:
    """The distributions a requirements file brings, with their dependencies (no extras)."""
    pending = [Requirement(line).name for line in requirements.read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    closure: set[str] = set()
    while pending:
        name = canonicalize_name(pending.pop())
        if name in closure:
            continue
        closure.add(name)
        for text in distribution(name).requires or []:
            required = Requirement(text)
            if required.marker is None or required.marker.evaluate({"extra": ""}):
                pending.append(required.name)
    return closure


def link_third_party(closure: set[str], into: Path) -> None:
    """Link each distribution's top-level modules and metadata into ``into``, as pip would install them there."""
    for name in closure:
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            pytest.fail(f"{name} (a requirement to link) is not installed")
        tops = {Path(str(f)).parts[0] for f in dist.files or () if not str(f).startswith("..")}
        for top in tops:
            if top.endswith(".pth") or top == "__pycache__" or top.startswith("__editable__"):
                continue
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (into / top).exists():
                (into / top).symlink_to(source)
