"""The regions served: every region botocore knows by default, narrowed by FERRYMQ_REGIONS."""

from __future__ import annotations

import pytest

from ferrymq.regions import known_regions
from ferrymq.settings import Settings


@pytest.mark.parametrize("region", ["us-east-1", "eu-central-1", "us-west-1", "ap-southeast-2", "sa-east-1",
                                    "cn-north-1", "us-gov-west-1"])
def test_every_partitions_regions_are_known(region: str) -> None:
    assert region in known_regions()


@pytest.mark.parametrize("region", ["eu-fake-1", "xx", "aws-global", "us-east-1x", ""])
def test_made_up_regions_and_global_endpoints_are_not(region: str) -> None:
    assert region not in known_regions()


def test_every_known_region_is_served_by_default() -> None:
    served = Settings.from_env({}).served_regions
    assert known_regions() <= served and "eu-central-1" in served and "eu-fake-1" not in served


def test_a_home_region_botocore_does_not_know_is_served_too() -> None:
    assert "local-1" in Settings(region="local-1").served_regions


def test_ferrymq_regions_narrows_to_the_home_region_and_those_listed() -> None:
    settings = Settings.from_env({"FERRYMQ_REGIONS": " eu-central-1, ap-south-1 ,", "FERRYMQ_REGION": "us-east-1"})
    assert settings.served_regions == frozenset({"us-east-1", "eu-central-1", "ap-south-1"})
