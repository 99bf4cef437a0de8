"""``python -m ferrymq.infra.cluster_init``: what ``ferrymq cluster init`` does (every partition's replica set
created where missing, the cluster registered), with nothing but boto3 and FerryMQ itself: the storage-worker
image's packages.  template.yaml runs it as each worker task's first container, before the worker; it is
idempotent (conditional creates), so every task may run it.
"""

from __future__ import annotations

import sys

from ferrymq.infra.cluster import cluster_layouts, ensure_replica_sets
from ferrymq.settings import Settings


def main() -> int:
    settings = Settings.from_env()
    try:
        for layout in cluster_layouts(settings):
            for partition, rs in sorted(ensure_replica_sets(settings, layout).items()):
                print(f"cluster {layout.name} partition {partition}: replicas {','.join(rs.replicas)}, "
                      f"acks {rs.acks.value}", flush=True)
    except Exception as exc:
        # One line the task's log shows, not a traceback: the cause is nearly always the table or the role.
        print(f"ferrymq cluster init: {exc.__cause__ or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
