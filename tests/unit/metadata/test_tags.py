"""Queue tag rules: limits, characters and the reserved prefix."""

from __future__ import annotations

import pytest

from ferrymq.errors import InvalidParameterValue, MissingParameter
from ferrymq.metadata import tags


def test_valid_tags_pass_and_merge_over_existing_ones() -> None:
    checked = tags.check_tags({"team": "core", "cost-centre": "", "k/v=a+b@c.d_e:f": "Gr\u00fc\u00dfe 42"}, "q",
                              required=True)
    assert tags.merged({"team": "old", "keep": "x"}, checked, "q") == {**checked, "keep": "x"}


def test_create_queue_may_carry_no_tags_but_tag_queue_must() -> None:
    assert tags.check_tags({}, "q", required=False) == {}
    with pytest.raises(MissingParameter, match=r"The request must contain the parameter Tags\."):
        tags.check_tags({}, "q", required=True)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"": "v"}, "Tag keys must be between 1 and 128 characters in length."),
        ({"k" * 129: "v"}, "Tag keys must be between 1 and 128 characters in length."),
        ({"bad#key": "v"}, "Tag keys may only contain unicode letters, digits, whitespace, or one of these symbols"),
        ({"aws:owner": "v"}, "Tag keys must not start with the reserved prefix aws:"),
        ({"AWS:owner": "v"}, "Tag keys must not start with the reserved prefix aws:"),
        ({"k": "v" * 257}, "Tag values must be between 0 and 256 characters in length."),
        ({"k": "aws:thing"}, "Tag values must not start with the reserved prefix aws:"),
        ({f"k{i}": "v" for i in range(51)}, "Too many tags added for queue q."),
    ],
)
def test_tags_breaking_sqs_rules_are_refused(given: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidParameterValue) as caught:
        tags.check_tags(given, "q", required=True)
    assert caught.value.message.startswith(message)


def test_fifty_tags_is_the_most_a_queue_holds() -> None:
    current = {f"k{i}": "v" for i in range(49)}
    assert len(tags.merged(current, {"k0": "new", "k49": "v"}, "q")) == 50
    with pytest.raises(InvalidParameterValue, match=r"Too many tags added for queue q\."):
        tags.merged(current, {"a": "1", "b": "2"}, "q")


def test_untag_keys_must_be_given_and_sized() -> None:
    assert tags.check_tag_keys(["a", "missing"]) == ["a", "missing"]
    for keys in ([], ["k" * 129]):
        with pytest.raises(InvalidParameterValue, match=r"Tag keys must be between 1 and 128 characters in length\."):
            tags.check_tag_keys(keys)
