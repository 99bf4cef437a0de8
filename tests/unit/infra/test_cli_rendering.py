"""How the admin commands show times, counts and partition ids: UTC with ``Z``, plural nouns that agree, and
partition ids that cannot be read as counts."""

from __future__ import annotations

import io

from ferrymq.infra import admin, cluster
from ferrymq.infra.cli_output import counted, utc


def _report() -> dict:
    return {
        "cluster": "local",
        "clusters": [{"cluster": "local", "partitions": [0, 1, 2, 5], "queues": 0, "max_queues": 100}],
        "workers": [
            {"worker_id": "worker-0", "address": "127.0.0.1:1", "admin": None, "alive": True, "answers": True,
             "leads": [0], "worst_stall_ms": None},
            {"worker_id": "worker-1", "address": "127.0.0.1:2", "admin": None, "alive": True, "answers": True,
             "leads": [], "worst_stall_ms": 3},
        ],
        "partitions": [{"partition": 0, "leader": "worker-0", "epoch": 0, "isr": ["worker-0"],
                        "replicas": ["worker-0", "worker-1"], "acks": "majority", "lag": {"worker-1": 0}}],
    }


def test_times_are_utc_with_z_and_counts_agree() -> None:
    assert utc(0) == "1970-01-01T00:00:00Z"
    assert utc(1_700_000_000.9) == "2023-11-14T22:13:20Z"
    assert utc(None) is None
    assert (counted(1, "message"), counted(0, "message"), counted(2, "message")) == (
        "1 message", "0 messages", "2 messages")


def test_cluster_status_names_partition_ids_so_they_are_not_counts() -> None:
    tables, notes = cluster.render(_report())
    clusters, workers, partitions = tables
    assert clusters.rows == [("local", "p0-p2,p5", "0", "100")]
    assert [row[5] for row in workers.rows] == ["p0", "none"]
    assert "LEADER OF" in workers.columns and "LEADS" not in workers.columns
    assert partitions.rows[0][0] == "p0"
    assert notes == []


def test_cluster_status_prints_the_same_table_style_as_the_other_commands() -> None:
    out = io.StringIO()
    admin.print_cluster_status(_report(), out)
    text = out.getvalue()
    # rich's SIMPLE_HEAD box: the header underlined with a rule, as `keys list` and `queues list` print
    assert "─" in text and "p0-p2,p5" in text and "LEADER OF" in text
    assert "PARTITIONS 0" not in " ".join(text.split())
