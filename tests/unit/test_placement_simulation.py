"""The out-cluster manager's placement, simulated: 100,000 queues of skewed sizes over 1,000 clusters, and a
worker added to a cluster. Deterministic (seeded); the benchmark prints the same figures at other sizes."""

from __future__ import annotations

import random

from ferrymq.placement import ClusterPlacer, replicas_for, with_new_worker


def skewed_sizes(n: int, seed: int) -> list[float]:
    """Pareto-distributed queue sizes (alpha 1.2): most queues are small, a few are thousands of times larger."""
    rng = random.Random(seed)
    return [rng.paretovariate(1.2) for _ in range(n)]


def test_100k_skewed_queues_over_1000_clusters_stay_within_20_percent_of_the_mean() -> None:
    sizes = skewed_sizes(100_000, seed=7)
    clusters = {f"c{i}": 1.5 * sum(sizes) / 1_000 for i in range(1_000)}
    placer = ClusterPlacer(clusters, max_shard=sum(sizes) / 1_000 / 20)
    placed = [placer.place(f"q{i}", size) for i, size in enumerate(sizes)]
    assert all(shards is not None for shards in placed)
    assert placer.imbalance() <= 1.2
    # and the largest queues were spread over several clusters, never over one cluster's capacity
    biggest = max(range(len(sizes)), key=sizes.__getitem__)
    assert len({s.cluster for s in placed[biggest] or []}) > 1
    assert all(placer.load[c] <= clusters[c] for c in clusters)


def test_clusters_of_different_capacities_fill_in_proportion_and_a_queue_that_fits_nowhere_is_refused() -> None:
    placer = ClusterPlacer({"small": 10.0, "large": 30.0}, max_shard=1.0)
    for i in range(36):
        assert placer.place(f"q{i}", 1.0) is not None
    assert (placer.load["small"], placer.load["large"]) == (9.0, 27.0)
    # four more fit (one on small, three on large), then nothing does, and a refusal leaves no load behind
    for i in range(4):
        assert placer.place(f"r{i}", 1.0) is not None
    assert placer.place("too-much", 1.0) is None
    assert placer.load == {"small": 10.0, "large": 30.0}


def test_adding_a_worker_moves_one_replica_in_n_plus_one_and_keeps_the_others_where_they_were() -> None:
    workers = ["w0", "w1", "w2", "w3"]
    before = {p: replicas_for(p, workers, 3) for p in range(64)}
    after = with_new_worker(before, "w4")
    moved = sum(1 for p in before for a, b in zip(before[p], after[p], strict=True) if a != b)
    total = 64 * 3
    # then the new worker took a fifth of the replicas (1/(n+1)), which is all that moved
    assert moved == total // 5
    assert moved / total <= 1 / len(workers)
    counts = {w: sum(w in r for r in after.values()) for w in [*workers, "w4"]}
    assert max(counts.values()) - min(counts.values()) <= 1
    assert all(len(set(r)) == 3 for r in after.values())


def test_a_joining_worker_never_takes_a_partitions_current_leader() -> None:
    # given three workers where worker w0 leads every partition (the others failed over to it)
    workers = ["w0", "w1", "w2"]
    before = {p: replicas_for(p, workers, 3) for p in range(6)}
    leaders = dict.fromkeys(before, "w0")
    # when w3 joins, then no replica of w0 moves, and w3 still takes its quarter from the others
    after = with_new_worker(before, "w3", pinned=leaders)
    assert all("w0" in after[p] for p in after)
    assert sum("w3" in r for r in after.values()) == 18 // 4
