"""The out-cluster manager's placement of queues over clusters, and a worker joining a cluster: figures.

    python benchmarks/placement_bench.py --queues 100000 --clusters 1000

Queue sizes are Pareto-distributed (alpha 1.2). Prints the time per placement, the max/mean utilisation,
how many queues were spread over several clusters, and for a cluster of N workers gaining one, the share of
replicas that moved. It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import random
import time

from ferrymq.placement import ClusterPlacer, replicas_for, with_new_worker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=100_000)
    parser.add_argument("--clusters", type=int, default=1_000)
    parser.add_argument("--headroom", type=float, default=1.5, help="capacity over the mean load")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    sizes = [rng.paretovariate(1.2) for _ in range(args.queues)]
    mean_cluster = sum(sizes) / args.clusters
    placer = ClusterPlacer(
        {f"c{i}": args.headroom * mean_cluster for i in range(args.clusters)}, max_shard=mean_cluster / 20
    )
    started = time.perf_counter()
    placed = [placer.place(f"q{i}", size) for i, size in enumerate(sizes)]
    elapsed = time.perf_counter() - started
    spread = sum(1 for shards in placed if shards and len(shards) > 1)
    refused = sum(1 for shards in placed if shards is None)
    print(f"{args.queues} queues over {args.clusters} clusters: {elapsed / args.queues * 1e6:.1f} µs per queue, "
          f"max/mean utilisation {placer.imbalance():.3f}, {spread} queues spread over several clusters, "
          f"{refused} refused; largest queue {max(sizes) / mean_cluster:.1f}x a cluster's mean load")
    for n in (3, 4, 6, 9):
        workers = [f"w{i}" for i in range(n)]
        before = {p: replicas_for(p, workers, 3) for p in range(256)}
        after = with_new_worker(before, f"w{n}")
        moved = sum(1 for p in before for a, b in zip(before[p], after[p], strict=True) if a != b)
        print(f"cluster of {n} workers + 1 (256 partitions, RF 3): {moved} of {256 * 3} replicas moved "
              f"({moved / (256 * 3):.3f}; 1/N = {1 / n:.3f})")


if __name__ == "__main__":
    main()
