"""The worker's append-only log: segment format (:mod:`.format`), record codec, recovery, reading from an
offset, group commit, truncation, the epoch history and compaction."""
