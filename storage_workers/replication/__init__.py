"""Replication of a partition from its leader replica to its followers (docs/design/replication.md, step 4).

Roles are static for now (:mod:`.roles`, configured per partition).  The leader side is :mod:`.leader`: it
appends the engine's records under its epoch, keeps the most recent frames in a :mod:`.tail` buffer, answers
followers' FETCH requests and counts their acknowledgements in a :mod:`.commit` tracker, whose high watermark
gates the replies to clients.  The follower side is :mod:`.follower`: a loop that pulls frames, appends them
to its own log and applies them to its state.
"""

from ferrymq.storage.replication.commit import CommitTracker
from ferrymq.storage.replication.follower import Follower
from ferrymq.storage.replication.leader import LeaderStream
from ferrymq.storage.replication.roles import FollowerRole, LeaderRole
from ferrymq.storage.replication.tail import TailBuffer

__all__ = ["CommitTracker", "Follower", "FollowerRole", "LeaderRole", "LeaderStream", "TailBuffer"]
