"""Reading ``template.yaml``: CloudFormation's short-form tags and the intrinsics the local stack needs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

TEMPLATE_PATH = Path(__file__).resolve().parent.parent / "template.yaml"


@dataclass(frozen=True)
class Intrinsic:
    """A CloudFormation intrinsic function such as ``!Sub`` or ``!GetAtt``, kept unresolved."""

    name: str
    value: Any


class _CfnLoader(yaml.SafeLoader):
    pass


def _construct(tag: str):
    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> Intrinsic:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
        return Intrinsic(tag, value)

    return construct


for _tag in ("Ref", "Sub", "GetAtt", "Join", "If", "Select", "Split", "FindInMap", "ImportValue",
             "Equals", "Not", "And", "Or", "Condition", "GetAZs", "Base64", "Cidr"):
    _CfnLoader.add_constructor(f"!{_tag}", _construct(_tag))


def load(path: Path = TEMPLATE_PATH) -> dict[str, Any]:
    with path.open() as fh:
        return yaml.load(fh, Loader=_CfnLoader)


_SUB_VAR = re.compile(r"\$\{([^}!][^}]*)\}")


def resolve(value: Any, names: dict[str, str]) -> Any:
    """Resolve ``!Ref``/``!Sub`` of parameters and pseudo-parameters; anything else is returned as is."""
    if isinstance(value, Intrinsic):
        if value.name == "Ref" and value.value in names:
            return names[value.value]
        if value.name == "Sub" and isinstance(value.value, str):
            return _SUB_VAR.sub(lambda m: names.get(m.group(1), m.group(0)), value.value)
        return value
    if isinstance(value, dict):
        return {k: resolve(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, names) for v in value]
    return value


def resources_of_type(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    return {
        name: res for name, res in template.get("Resources", {}).items() if res.get("Type") == resource_type
    }
