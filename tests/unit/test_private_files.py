"""Owner-only modes for FerryMQ's data files, and the cluster secret in Settings."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ferrymq.private_files import private_dir, restrict_umask, tighten_tree, write_private
from ferrymq.settings import Settings


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_tighten_tree_brings_every_dir_to_0700_and_file_to_0600_and_leaves_links_alone(tmp_path: Path) -> None:
    # given a tree with the modes earlier versions left
    (tmp_path / "workers" / "w0").mkdir(parents=True)
    (tmp_path / "workers" / "w0" / "00000000.seg").write_bytes(b"x")
    (tmp_path / "journal.log").write_bytes(b"y")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.write_text("not ours")
    os.chmod(outside, 0o644)
    (tmp_path / "link").symlink_to(outside)
    for path, mode in [(tmp_path, 0o755), (tmp_path / "workers", 0o755), (tmp_path / "workers" / "w0", 0o775),
                       (tmp_path / "workers" / "w0" / "00000000.seg", 0o644), (tmp_path / "journal.log", 0o666)]:
        os.chmod(path, mode)
    # when it is tightened
    changed = tighten_tree(tmp_path)
    # then every directory and file is owner-only, the link's target untouched, and a second pass changes nothing
    assert changed == 5
    assert [_mode(p) for p in (tmp_path, tmp_path / "workers", tmp_path / "workers" / "w0")] == [0o700] * 3
    assert [_mode(p) for p in (tmp_path / "workers" / "w0" / "00000000.seg", tmp_path / "journal.log")] == [0o600] * 2
    assert _mode(outside) == 0o644
    assert tighten_tree(tmp_path) == 0


def test_files_created_under_the_private_umask_are_owner_only(tmp_path: Path) -> None:
    previous = restrict_umask()
    try:
        directory = tmp_path / "made"
        directory.mkdir()
        fd = os.open(directory / "wide", os.O_WRONLY | os.O_CREAT, 0o666)
        os.close(fd)
    finally:
        os.umask(previous)
    assert (_mode(directory), _mode(directory / "wide")) == (0o700, 0o600)


def test_write_private_and_private_dir(tmp_path: Path) -> None:
    target = private_dir(tmp_path / "a" / "b")
    write_private(target / "secret", b"s3cr3t")
    write_private(target / "secret", b"replaced")
    assert (target / "secret").read_bytes() == b"replaced"
    assert (_mode(target), _mode(target / "secret")) == (0o700, 0o600)
    assert sorted(p.name for p in target.iterdir()) == ["secret"]


def test_the_cluster_secret_comes_from_the_variable_or_the_file_and_is_never_shown(tmp_path: Path) -> None:
    secret_file = tmp_path / "cluster.secret"
    secret_file.write_text("from-the-file\n")
    assert Settings.from_env({"FERRYMQ_CLUSTER_SECRET_FILE": str(secret_file)}).cluster_secret == "from-the-file"
    assert Settings.from_env({"FERRYMQ_CLUSTER_SECRET": "direct",
                              "FERRYMQ_CLUSTER_SECRET_FILE": str(secret_file)}).cluster_secret == "direct"
    assert Settings.from_env({}).cluster_secret == ""
    assert "direct" not in repr(Settings(cluster_secret="direct"))
