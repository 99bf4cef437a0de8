"""The worker's append-only log: segment format, record codec, recovery, group commit and compaction."""
