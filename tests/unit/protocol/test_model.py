"""The compiled model: legacy query/XML names must be the ones the 2012-11-05 query model declares."""

from __future__ import annotations

from botocore.model import ServiceModel
from botocore.model import Shape as BotoShape

from ferrymq.protocol.model import LIST, MAP, OPERATIONS, STRUCTURE, Shape


def _legacy_member_name(member_shape: BotoShape, member_name: str) -> str:
    # The rule botocore's XML parser and query serializer share for naming a member.
    if member_shape.type_name == "list" and member_shape.serialization.get("flattened"):
        element_name = member_shape.member.serialization.get("name")
        if element_name is not None:
            return element_name
    return member_shape.serialization.get("name", member_name)


def _mismatches(ours: Shape, legacy: BotoShape, path: str) -> list[str]:
    found: list[str] = []
    if ours.kind == STRUCTURE:
        for name, legacy_member in legacy.members.items():
            member = ours.members.get(name)
            if member is None:
                found.append(f"{path}.{name}: missing")
                continue
            expected = _legacy_member_name(legacy_member, name)
            if member.query_name != expected:
                found.append(f"{path}.{name}: query name {member.query_name!r} != {expected!r}")
            if legacy_member.type_name in ("list", "map"):
                flattened = bool(legacy_member.serialization.get("flattened"))
                if member.flattened != flattened:
                    found.append(f"{path}.{name}: flattened {member.flattened} != {flattened}")
            found.extend(_mismatches(member.shape, legacy_member, f"{path}.{name}"))
    elif ours.kind == LIST:
        expected = legacy.member.serialization.get("name", "member")
        if ours.element_name != expected:
            found.append(f"{path}[]: element name {ours.element_name!r} != {expected!r}")
        assert ours.element is not None
        found.extend(_mismatches(ours.element, legacy.member, f"{path}[]"))
    elif ours.kind == MAP:
        names = (legacy.key.serialization.get("name", "key"), legacy.value.serialization.get("name", "value"))
        if (ours.key_name, ours.value_name) != names:
            found.append(f"{path}{{}}: key/value names {(ours.key_name, ours.value_name)} != {names}")
        assert ours.value is not None
        found.extend(_mismatches(ours.value, legacy.value, f"{path}{{}}"))
    return found


def test_every_legacy_name_matches_the_query_model(query_model: ServiceModel) -> None:
    # given every operation of the 2012-11-05 query model
    mismatches: list[str] = []
    for name in query_model.operation_names:
        legacy = query_model.operation_model(name)
        ours = OPERATIONS[name]
        # when our compiled input and output shapes are compared with it member by member
        mismatches.extend(_mismatches(ours.input, legacy.input_shape, f"{name}.input"))
        if legacy.output_shape is not None:
            assert ours.output is not None, name
            mismatches.extend(_mismatches(ours.output, legacy.output_shape, f"{name}.output"))
    # then every query and XML name agrees
    assert mismatches == []


def test_operations_cover_the_current_json_model(json_model: ServiceModel) -> None:
    assert set(OPERATIONS) == set(json_model.operation_names)
    assert OPERATIONS["SendMessage"].output is not None
    assert OPERATIONS["DeleteMessage"].output is None


def test_members_younger_than_the_query_model_get_the_documented_query_name() -> None:
    receive = OPERATIONS["ReceiveMessage"].input.members["MessageSystemAttributeNames"]
    assert (receive.query_name, receive.flattened) == ("MessageSystemAttributeName", True)
