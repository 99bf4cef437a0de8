"""``spark-submit`` entries, one per job: ``billing``, ``analytics``, ``report``."""

JOBS = ("billing", "analytics", "report")
