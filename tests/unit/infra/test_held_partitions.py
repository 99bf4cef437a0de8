"""The record of what each worker held at the last start: read back as written, and anything else ignored."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ferrymq.infra import held_partitions


def test_what_is_written_is_read_back_owner_only(tmp_path: Path) -> None:
    held = {("local", "worker-0"): (0, 2), ("local", "worker-1"): (), ("other", "worker-0"): (1,)}
    held_partitions.write(tmp_path, held)
    assert held_partitions.read(tmp_path) == held
    assert stat.S_IMODE(held_partitions.path(tmp_path).stat().st_mode) == 0o600


def test_no_record_is_an_empty_one(tmp_path: Path) -> None:
    assert held_partitions.read(tmp_path) == {}


@pytest.mark.parametrize("text", [
    "{not json",
    "[]",
    '{"workers": 5}',
    '{"workers": [{"cluster": "local", "worker": "worker-0"}]}',
    '{"workers": [{"cluster": "local", "worker": "worker-0", "partitions": [-1]}]}',
    '{"workers": [{"cluster": "local", "worker": "worker-0", "partitions": ["0"]}]}',
    '{"workers": [{"cluster": "local", "worker": "worker-0", "partitions": [true]}]}',
    '{"workers": [{"cluster": "local", "worker": "worker-0", "partitions": 7}]}',
])
def test_a_record_that_cannot_be_read_is_ignored_and_named(tmp_path: Path, text: str,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    held_partitions.path(tmp_path).write_text(text)
    assert held_partitions.read(tmp_path) == {}
    assert "ignoring" in caplog.text
