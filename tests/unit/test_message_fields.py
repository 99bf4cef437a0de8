"""The SequenceNumber a FIFO message shows: shaped as AWS's (20 digits, around 1.89e19, uneven gaps), in the
counter's order, as numbers and as strings."""

from __future__ import annotations

import itertools
import re

import pytest

from ferrymq.message_fields import SEQUENCE_NUMBER_STEP, sequence_number


def test_numbers_are_20_digits_and_keep_the_counters_order_as_numbers_and_as_strings() -> None:
    shown = [sequence_number(n) for n in range(0, 200_000)]
    assert all(re.fullmatch(r"1[0-9]{19}", s) for s in shown)
    assert shown == sorted(shown)
    assert all(int(a) < int(b) for a, b in itertools.pairwise(shown))


def test_no_long_run_of_zeros_as_the_counter_of_a_partition_grows() -> None:
    # the old mapping showed 18000000000000057600 for the 225th message: twelve zeros in a row
    assert not [n for n in range(0, 3_000_000) if "0" * 8 in sequence_number(n)]


def test_gaps_are_uneven_and_around_aws_size() -> None:
    numbers = [int(sequence_number(n)) for n in range(1, 1000)]
    gaps = {b - a for a, b in itertools.pairwise(numbers)}
    assert len(gaps) > 900 and all(0 < gap < 2 * SEQUENCE_NUMBER_STEP for gap in gaps)
    assert 1.88e19 < numbers[0] < 1.9e19


@pytest.mark.parametrize("seq", [1, 225, 10**9, 10**15])
def test_the_worker_rpcs_zero_padded_form_gives_the_same_number(seq: int) -> None:
    assert sequence_number(f"{seq:020d}") == sequence_number(seq)
    assert len(sequence_number(seq)) == 20
