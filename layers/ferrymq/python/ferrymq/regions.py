"""The AWS regions FerryMQ serves by default: every region botocore knows.

AWS, LocalStack and moto answer a client signing for any real region, so multi-region code and tests work
against them unchanged; FerryMQ does the same (``FERRYMQ_REGIONS`` may narrow it, see
:attr:`ferrymq.settings.Settings.served_regions`). A made-up region is refused, as AWS refuses it.

botocore lists regions twice: per partition in ``partitions.json`` (the newest regions first appear there) and
per service in ``endpoints.json``. Both are read, once, from the botocore installed beside us.
"""

from __future__ import annotations

from functools import cache

from botocore.exceptions import DataNotFoundError
from botocore.loaders import Loader
from botocore.session import get_session

_PSEUDO_SUFFIX = "-global"
"""Partitions' global endpoints (``aws-global``): names of endpoints, not regions a request is signed for."""


@cache
def known_regions() -> frozenset[str]:
    """Every region of every AWS partition that botocore knows."""
    regions: set[str] = set()
    try:
        partitions = Loader().load_data("partitions")["partitions"]
    except DataNotFoundError:  # an older botocore without partitions.json: endpoints.json still lists them
        partitions = []
    for partition in partitions:
        regions.update(name for name in partition.get("regions", {}) if not name.endswith(_PSEUDO_SUFFIX))
    session = get_session()
    for partition_name in session.get_available_partitions():
        regions.update(session.get_available_regions("sqs", partition_name=partition_name))
    return frozenset(regions)
