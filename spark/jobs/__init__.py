"""``spark-submit`` entries, one per job: ``billing``, ``analytics``, ``report``; and ``daily``, any of them in one
session."""

JOBS = ("billing", "analytics", "report")
