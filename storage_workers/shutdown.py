"""A worker told to stop (SIGTERM: a rolling replacement, a container stopped) hands its leaderships away first.

Without this, each partition it led waits out the rest of its lease before an in-sync replica may claim it.
For every partition it still leads, once the controller no longer renews or claims anything:

1. it refuses new requests and waits, a second at most, for what it appended to commit, so that the replies
   waiting for it are answered (``LeaderTerm.drain``); then it stops answering as leader (``stand_by``):
   nothing more is appended or acknowledged here;
2. if another replica is in the in-sync set, it ends its lease now (``ReplicaSets.release``, the conditional
   write a preferred-replica handover uses), so the in-sync replicas claim at their next poll, in preference
   order.

Nothing acknowledged is lost: a record is acknowledged only once every in-sync replica has it durable, and
only in-sync replicas may claim.  Replies still waiting for replication when the role ends are not
acknowledged (ServiceUnavailable); their clients retry.  A partition with no other in-sync replica keeps its
lease, which runs out as before: no replica could take over sooner.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from ferrymq.aws.replica_sets import CoordinationError, ReplicaSets
from ferrymq.errors import SqsError
from ferrymq.storage.server.leader_term import LeaderTerm
from ferrymq.storage.server.replica import PartitionReplica

log = logging.getLogger(__name__)


async def hand_over_leaderships(replicas: Mapping[int, PartitionReplica], sets: ReplicaSets, me: str,
                                now_ms: Callable[[], int]) -> list[int]:
    """Hand over every partition of ``replicas`` that ``me`` leads; returns those released.  ``now_ms``:
    the wall time (ms) the controller writes into coordination items."""
    released = []
    handing: list[tuple[int, PartitionReplica, LeaderTerm, list[str]]] = []
    for partition, replica in sorted(replicas.items()):
        term = replica.term
        if term is None:
            continue
        # The leader's own view of its replica set, which it keeps as the coordination item has it: no read
        # of DynamoDB, which may be what is going away; the release below is a lease write, on the client
        # whose calls end within a fraction of a lease.
        tracker = term.stream.tracker
        successors = [r for r in tracker.replicas if r in tracker.isr and r != me]
        if not successors:
            log.info("partition %d: no other replica in sync; its lease runs out instead", partition)
            continue
        handing.append((partition, replica, term, successors))
    # All at once: a stop waits a drain's bound at most, however many partitions it leads.
    await asyncio.gather(*(term.drain("this worker is stopping") for _, _, term, _ in handing))
    for partition, replica, term, successors in handing:
        epoch = term.epoch
        await replica.stand_by(f"this worker is stopping; the in-sync replicas ({','.join(successors)}) take over")
        try:
            await asyncio.to_thread(sets.release, partition, me, epoch, now_ms())
        except (CoordinationError, SqsError) as exc:
            log.warning("partition %d: could not end its lease: %s", partition, exc)
            continue
        except Exception:
            # Stopping goes on whatever failed here: the lease then simply runs out.
            log.exception("partition %d: could not end its lease", partition)
            continue
        log.info("partition %d: lease ended in epoch %d; %s claims first", partition, epoch, successors[0])
        released.append(partition)
    return released
