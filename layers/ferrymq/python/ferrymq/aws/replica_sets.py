"""Replica sets in DynamoDB: which workers hold each partition, which of them leads, in which epoch.

Table ``settings.partitions_table``, the table of :class:`~ferrymq.aws.partitions.PartitionMap`, one item
per partition; this adapter adds attributes beside that class's and never touches its ones::

    attribute    type  meaning
    partition    N     partition number (the hash key)
    cluster      S     the cluster whose workers hold the replicas
    replicas     L<S>  worker ids, the preferred leader first; a list because the order matters
    leader       S     the worker that took the current epoch
    epoch        N     grows by one per claim; every write a leader makes is conditional on it
    isr          SS    the in-sync replicas
    lease_until  N     ms since the Unix epoch; the leader's lease runs through this millisecond
    acks         S     leader | majority | all (:class:`~ferrymq.replication_rules.Acks`)
    receipt_key  B     PartitionMap's; untouched here
    worker_id, host, port   the leader's RPC address, as PartitionMap reads it for the front end; written
                       by ``claim`` together with the epoch, so the address always names the epoch's leader

Invariant: ``leader in isr`` and ``isr <= replicas``. Every change below is ONE UpdateItem whose condition
is the rule that allows it; nothing is read first, so no read can go stale between a check and a write::

    operation    condition                                                  update
    create       attribute_not_exists(replicas)                             all of the above; leader
                                                                            replicas[0], epoch one above
                                                                            any epoch the item has
    claim        epoch = seen AND contains(isr, me)                         leader = me, epoch = seen + 1,
                 AND (lease_until < now OR leader = me)                     lease_until = now + lease,
                                                                            worker_id/host/port = me's
    renew        leader = me AND epoch = e                                  lease_until = now + lease
    release      leader = me AND epoch = e                                  lease_until = now
    shrink_isr   leader = me AND epoch = e                                  DELETE isr (members)
    expand_isr   leader = me AND epoch = e AND contains(replicas, m)...     ADD isr (members)
    leave_isr    epoch = e AND contains(isr, me) AND size(isr) > 1          DELETE isr (me); as the leader
                 AND (leader = me | leader <> me, as read)                  also lease_until = now
    reassign     epoch = e AND replicas = previous AND leader IN (new)      replicas = new, DELETE isr
                                                                            (previous - new)

``isr`` is a string set so that shrinking and expanding are DELETE and ADD of members: a leader never
writes back a list it read earlier and so never undoes a concurrent change. DynamoDB has no empty sets,
and none is needed: the leader is always in the set. ``contains(path, :member)`` tests membership of a
string set and of a list alike, in DynamoDB and in the project's stand-in.

``leave_isr`` is the one change a follower makes: a replica whose log was damaged and set aside holds less
than it acknowledged, so it takes itself out of the set before it replicates again (and may then no longer
be elected); the leader adds it back once it has caught up. Its own leadership, if the item still names it,
ends with it (the lease runs out now), so another in-sync replica claims at once. The last member never
leaves: a partition whose only in-sync copy is damaged stays as it is, refused by its worker.

Leases only say when another replica may elect itself; safety comes from epochs, which is why a leader's
shrink, expand and renewal are fenced by its epoch, not by its lease: a leader whose lease lapsed but whom
nobody replaced is still the only writer of its epoch. A leader that restarts claims again through its own
lease (:func:`~ferrymq.replication_rules.may_claim`), so each run of a leader has an epoch of its own, and a
worker taking up leadership always claims rather than renewing the epoch it finds; epoch 1, the epoch of
the assignment, is therefore never appended in.

A refused write raises a :class:`CoordinationError` naming why, with the item as the refusal found it
(``ReturnValuesOnConditionCheckFailure``), so the caller learns the new epoch and leader without reading.
These are not :class:`~ferrymq.errors.ServiceUnavailable`: an outage means "try again", a refusal means
"your view is stale" and a leader must step down. Outages are ServiceUnavailable
(:func:`ferrymq.aws.errors.translate_client_errors`), any other ClientError an InternalError.

A write whose answer was lost may be made again (by the SDK, or by the caller: lease writes make one attempt,
``session.lease_config``); when the first attempt landed, the retry is refused by the state it made.
``claim`` and ``reassign`` recognise their own result in the refusal and return it;
``renew``, ``shrink_isr`` and ``expand_isr`` are idempotent anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from typing import Any

from botocore.exceptions import ClientError

from ferrymq.aws.errors import outages_or_internal
from ferrymq.errors import InternalError
from ferrymq.replication_rules import Acks, ReplicaSet, is_leader
from ferrymq.settings import Settings

log = logging.getLogger(__name__)

# Expression names of every attribute this adapter writes; each expression uses some of them. No name may be
# the start of another: a request's names are those found in its expressions' text.
_NAMES = {
    "#c": "cluster",
    "#r": "replicas",
    "#l": "leader",
    "#e": "epoch",
    "#i": "isr",
    "#u": "lease_until",
    "#a": "acks",
    "#w": "worker_id",
    "#h": "host",
    "#p": "port",
    "#xh": "replication_host",
    "#xp": "replication_port",
}


class CoordinationError(Exception):
    """A write to a partition's coordination item was refused; ``current`` is the item the refusal found."""

    def __init__(self, partition: int, current: ReplicaSet | None, message: str) -> None:
        super().__init__(f"partition {partition}: {message}")
        self.partition = partition
        self.current = current


class NoSuchPartition(CoordinationError):
    """The partition has no replica set yet."""


class PartitionExists(CoordinationError):
    """The partition already has a different replica set."""


class Fenced(CoordinationError):
    """The caller's epoch (or, for reassign, its replica set) is stale: a leader steps down, a manager reads again."""


class NotInSync(CoordinationError):
    """Only an in-sync replica may become leader."""


class LeaseHeld(CoordinationError):
    """Another worker's leader lease is still live."""


class NotAReplica(CoordinationError):
    """Only workers assigned to the partition may join its in-sync set."""


class LeaderMustStay(CoordinationError):
    """The change would take the leader out of its in-sync set or its replica set."""


class LastInSync(CoordinationError):
    """The only in-sync replica cannot leave the set: no other one holds every acknowledged record."""


class _Refused(Exception):
    def __init__(self, current: ReplicaSet | None) -> None:
        self.current = current


class ReplicaSets:
    def __init__(self, client: Any, table_name: str, *, lease_client: Any = None) -> None:
        """``lease_client`` makes the lease writes (claim, renew, release), ``client`` the rest; by default the
        same."""
        self._client = client
        self._lease_client = lease_client if lease_client is not None else client
        self.table_name = table_name

    @classmethod
    def from_settings(cls, settings: Settings) -> ReplicaSets:
        """Lease writes on a client whose every call ends within half a lease (``session.lease_config``), so
        that one renewal never holds up the next; scans and other writes on the default client."""
        from ferrymq.aws import session

        config = session.lease_config(settings.leader_lease_seconds)
        return cls(
            session.client("dynamodb", settings),
            settings.partitions_table,
            lease_client=session.client("dynamodb", settings, config=config),
        )

    def create(
        self,
        partition: int,
        cluster: str,
        replicas: Sequence[str],
        acks: Acks,
        *,
        isr: Collection[str] | None = None,
        lease_until: int = 0,
    ) -> ReplicaSet:
        """Assign the partition to ``replicas``, ``replicas[0]`` leading with no lease yet, or with one up to
        ``lease_until`` (ms): the others then leave the first claim to it for that long.

        Every replica is in sync unless ``isr`` names fewer: the replicas that hold the partition's data
        when a single-copy partition becomes replicated, so that only they may lead and the empty ones
        catch up from them. Creating it again with the same cluster, replicas and acks returns the item as
        it is now. The epoch continues above any epoch the item already has (from a worker of before replica
        sets), so no worker ever sees it go back.
        """
        replicas = _worker_ids(replicas)
        acks = Acks(acks)
        in_sync = _worker_ids(isr) if isr is not None else replicas
        if replicas[0] not in in_sync or not set(in_sync) <= set(replicas):
            raise ValueError(f"the in-sync set {in_sync} holds the first replica and only replicas of {replicas}")
        try:
            return self._update(
                partition,
                "SET #c = :c, #r = :r, #l = :l, #e = if_not_exists(#e, :zero) + :one, #i = :i, #u = :u, #a = :a",
                "attribute_not_exists(#r)",
                {
                    ":c": {"S": cluster},
                    ":r": _list(replicas),
                    ":l": {"S": replicas[0]},
                    ":zero": {"N": "0"},
                    ":one": {"N": "1"},
                    ":i": {"SS": list(in_sync)},
                    ":u": _n(lease_until),
                    ":a": {"S": acks.value},
                },
            )
        except _Refused as refused:
            now = refused.current
            if now is not None and (now.cluster, now.replicas, now.acks) == (cluster, replicas, acks):
                return now
            raise PartitionExists(partition, now, "already assigned to another replica set") from None

    def claim(
        self,
        partition: int,
        worker_id: str,
        seen_epoch: int,
        now_ms: int,
        lease_ms: int,
        address: tuple[str, int] | None = None,
        replication_address: tuple[str, int] | None = None,
    ) -> ReplicaSet:
        """Become leader in epoch ``seen_epoch + 1`` with a lease of ``lease_ms`` (see ``may_claim``),
        publishing ``address`` (host, port) as where the partition's requests go from now on, and
        ``replication_address`` as where its followers fetch from when that is elsewhere."""
        _positive(lease_ms)
        update = "SET #l = :me, #e = :next, #u = :until"
        values: dict[str, Any] = {
            ":me": {"S": worker_id},
            ":seen": _n(seen_epoch),
            ":next": _n(seen_epoch + 1),
            ":now": _n(now_ms),
            ":until": _n(now_ms + lease_ms),
        }
        if address is not None:
            update += ", #w = :me, #h = :host, #p = :port"
            values[":host"] = {"S": address[0]}
            values[":port"] = _n(address[1])
            if replication_address is not None and replication_address != address:
                update += ", #xh = :rhost, #xp = :rport"
                values[":rhost"] = {"S": replication_address[0]}
                values[":rport"] = _n(replication_address[1])
            else:
                update += " REMOVE #xh, #xp"
        try:
            return self._update(
                partition, update, "#e = :seen AND contains(#i, :me) AND (#u < :now OR #l = :me)", values, lease=True
            )
        except _Refused as refused:
            now = refused.current
            if now is None:
                raise NoSuchPartition(partition, None, "no replica set") from None
            if is_leader(now, worker_id, seen_epoch + 1):
                return now
            if now.epoch != seen_epoch:
                raise Fenced(partition, now, f"epoch is {now.epoch}, not {seen_epoch}") from None
            if worker_id not in now.isr:
                raise NotInSync(partition, now, f"{worker_id} is not in sync") from None
            raise LeaseHeld(partition, now, f"{now.leader}'s lease runs until {now.lease_until}") from None

    def renew(self, partition: int, worker_id: str, epoch: int, now_ms: int, lease_ms: int) -> ReplicaSet:
        """Extend the lease to ``now_ms + lease_ms`` while ``worker_id`` still leads in ``epoch``."""
        _positive(lease_ms)
        try:
            return self._update(
                partition,
                "SET #u = :until",
                "#l = :me AND #e = :e",
                {":me": {"S": worker_id}, ":e": _n(epoch), ":until": _n(now_ms + lease_ms)},
                lease=True,
            )
        except _Refused as refused:
            raise self._not_leader(partition, refused.current, worker_id, epoch) from None

    def release(self, partition: int, worker_id: str, epoch: int, now_ms: int) -> ReplicaSet:
        """End the lease now while ``worker_id`` still leads in ``epoch``: a handover of leadership, which the
        in-sync replicas claim in preference order from ``now_ms`` on."""
        try:
            return self._update(
                partition,
                "SET #u = :now",
                "#l = :me AND #e = :e",
                {":me": {"S": worker_id}, ":e": _n(epoch), ":now": _n(now_ms)},
                lease=True,
            )
        except _Refused as refused:
            raise self._not_leader(partition, refused.current, worker_id, epoch) from None

    def shrink_isr(self, partition: int, leader_id: str, epoch: int, remove: Collection[str]) -> ReplicaSet:
        """Drop lagging followers from the in-sync set, before the high watermark may pass what they have."""
        members = _worker_ids(remove)
        if leader_id in members:
            raise LeaderMustStay(partition, None, f"{leader_id} cannot leave its own in-sync set")
        try:
            return self._update(
                partition,
                "DELETE #i :m",
                "#l = :me AND #e = :e",
                {":me": {"S": leader_id}, ":e": _n(epoch), ":m": {"SS": list(members)}},
            )
        except _Refused as refused:
            raise self._not_leader(partition, refused.current, leader_id, epoch) from None

    def expand_isr(self, partition: int, leader_id: str, epoch: int, add: Collection[str]) -> ReplicaSet:
        """Add caught-up followers back to the in-sync set; only assigned replicas may join."""
        members = _worker_ids(add)
        values: dict[str, Any] = {":me": {"S": leader_id}, ":e": _n(epoch), ":m": {"SS": list(members)}}
        assigned = []
        for index, member in enumerate(members):
            values[f":m{index}"] = {"S": member}
            assigned.append(f"contains(#r, :m{index})")
        try:
            return self._update(partition, "ADD #i :m", " AND ".join(["#l = :me AND #e = :e", *assigned]), values)
        except _Refused as refused:
            now = refused.current
            if now is None or not is_leader(now, leader_id, epoch):
                raise self._not_leader(partition, now, leader_id, epoch) from None
            strangers = sorted(set(members) - set(now.replicas))
            raise NotAReplica(partition, now, f"not replicas: {', '.join(strangers)}") from None

    def leave_isr(self, partition: int, worker_id: str, seen: ReplicaSet, now_ms: int) -> ReplicaSet:
        """Take ``worker_id`` out of the in-sync set it is in, as ``seen`` (read in the current epoch) shows it,
        while another member stays; if it is ``seen``'s leader, its lease ends at ``now_ms`` too."""
        values: dict[str, Any] = {
            ":me": {"S": worker_id},
            ":m": {"SS": [worker_id]},
            ":e": _n(seen.epoch),
            ":one": _n(1),
        }
        update = "DELETE #i :m"
        condition = "#e = :e AND contains(#i, :me) AND size(#i) > :one"
        if seen.leader == worker_id:
            update += " SET #u = :now"
            values[":now"] = _n(now_ms)
            condition += " AND #l = :me"
        else:
            condition += " AND #l <> :me"
        try:
            return self._update(partition, update, condition, values)
        except _Refused as refused:
            now = refused.current
            if now is None:
                raise NoSuchPartition(partition, None, "no replica set") from None
            if worker_id not in now.isr:
                raise NotInSync(partition, now, f"{worker_id} is not in sync") from None
            if now.epoch != seen.epoch or now.leader != seen.leader:
                raise Fenced(partition, now, f"changed since epoch {seen.epoch} was read") from None
            raise LastInSync(partition, now, f"{worker_id} is the last in-sync replica") from None

    def reassign(self, partition: int, epoch: int, replicas: Sequence[str], *, previous: Sequence[str]) -> ReplicaSet:
        """Replace the replica set ``previous`` (as the caller read it in ``epoch``) by ``replicas``.

        The in-sync set keeps only members still assigned; new replicas join it when the leader finds them
        caught up. The leader must stay assigned: moving leadership is a claim, not a reassignment.
        ``previous`` is part of the condition because the in-sync set is cut by what left it, and a replica
        set changed since the caller looked would make that the wrong cut.
        """
        replicas, previous = _worker_ids(replicas), _worker_ids(previous)
        dropped = sorted(set(previous) - set(replicas))
        values: dict[str, Any] = {":e": _n(epoch), ":prev": _list(previous), ":new": _list(replicas)}
        candidates = []
        for index, member in enumerate(replicas):
            values[f":n{index}"] = {"S": member}
            candidates.append(f":n{index}")
        update = "SET #r = :new"
        if dropped:
            update += " DELETE #i :dropped"
            values[":dropped"] = {"SS": dropped}
        try:
            return self._update(
                partition, update, f"#e = :e AND #r = :prev AND #l IN ({', '.join(candidates)})", values
            )
        except _Refused as refused:
            now = refused.current
            if now is None:
                raise NoSuchPartition(partition, None, "no replica set") from None
            if now.epoch == epoch and now.replicas == replicas:
                return now
            if now.epoch != epoch or now.replicas != previous:
                raise Fenced(partition, now, f"changed since epoch {epoch} was read") from None
            raise LeaderMustStay(partition, now, f"leader {now.leader} is not among the new replicas") from None

    def get(self, partition: int) -> ReplicaSet | None:
        with _translated():
            resp = self._client.get_item(
                TableName=self.table_name, Key={"partition": _n(partition)}, ConsistentRead=True
            )
        item = resp.get("Item")
        return _decode(item) if item else None

    def all(self, cluster: str | None = None) -> list[ReplicaSet]:
        """Every partition's replica set (those of ``cluster`` only, when named), ordered by partition."""
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "ConsistentRead": True,
            "FilterExpression": "attribute_exists(#r)",
            "ExpressionAttributeNames": {"#r": "replicas"},
        }
        if cluster is not None:
            kwargs["FilterExpression"] += " AND #c = :c"
            kwargs["ExpressionAttributeNames"]["#c"] = "cluster"
            kwargs["ExpressionAttributeValues"] = {":c": {"S": cluster}}
        out: list[ReplicaSet] = []
        with _translated():
            while True:
                resp = self._client.scan(**kwargs)
                out.extend(rs for rs in map(_decode, resp.get("Items", [])) if rs is not None)
                last = resp.get("LastEvaluatedKey")
                if not last:
                    break
                kwargs["ExclusiveStartKey"] = last
        return sorted(out, key=lambda rs: rs.partition)

    def _update(
        self, partition: int, update: str, condition: str, values: dict[str, Any], *, lease: bool = False
    ) -> ReplicaSet:
        """One conditional UpdateItem (``lease``: on the lease client); the new item, or :class:`_Refused` with
        the item that refused it."""
        text = f"{update} {condition}"
        names = {k: v for k, v in _NAMES.items() if k in text}
        client = self._lease_client if lease else self._client
        with _translated():
            try:
                resp = client.update_item(
                    TableName=self.table_name,
                    Key={"partition": _n(partition)},
                    UpdateExpression=update,
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                    ReturnValues="ALL_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise
                if "Item" not in exc.response:
                    # A backend that ignores ReturnValuesOnConditionCheckFailure (or an absent item).
                    raise _Refused(self.get(partition)) from None
                raise _Refused(_decode(exc.response["Item"])) from None
        new = _decode(resp["Attributes"])
        if new is None:
            log.error("partition %d: an accepted write left no replica set", partition)
            raise InternalError()
        return new

    @staticmethod
    def _not_leader(partition: int, now: ReplicaSet | None, me: str, epoch: int) -> CoordinationError:
        if now is None:
            return NoSuchPartition(partition, None, "no replica set")
        return Fenced(partition, now, f"{me} does not lead epoch {epoch}; {now.leader} leads {now.epoch}")


def _decode(item: dict[str, Any]) -> ReplicaSet | None:
    """The replica set of an item; ``None`` for an item without one (a worker of before replica sets wrote it)."""
    if "replicas" not in item:
        return None
    claimed = item.get("worker_id", {}).get("S") == item["leader"]["S"]
    return ReplicaSet(
        partition=int(item["partition"]["N"]),
        cluster=item["cluster"]["S"],
        replicas=tuple(v["S"] for v in item["replicas"]["L"]),
        leader=item["leader"]["S"],
        epoch=int(item["epoch"]["N"]),
        isr=frozenset(item["isr"]["SS"]),
        lease_until=int(item["lease_until"]["N"]),
        acks=Acks(item["acks"]["S"]),
        leader_address=(
            (item["host"]["S"], int(item["port"]["N"])) if "host" in item and claimed else None
        ),
        replication_address=(
            (item["replication_host"]["S"], int(item["replication_port"]["N"]))
            if "replication_host" in item and claimed
            else None
        ),
    )


def _worker_ids(ids: Collection[str]) -> tuple[str, ...]:
    out = tuple(ids)
    if not out or any(not isinstance(i, str) or not i for i in out) or len(set(out)) != len(out):
        raise ValueError(f"expected distinct, non-empty worker ids, got {out!r}")
    return out


def _positive(lease_ms: int) -> None:
    if lease_ms <= 0:
        raise ValueError(f"a lease must be positive, got {lease_ms} ms")


def _n(value: int) -> dict[str, str]:
    return {"N": str(int(value))}


def _list(ids: Sequence[str]) -> dict[str, Any]:
    return {"L": [{"S": i} for i in ids]}


def _translated() -> AbstractContextManager[None]:
    return outages_or_internal("replica-set call", log)
