"""What of template.yaml the offline deploy lane hands the emulator (ferrymq.infra.deploy_local)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ferrymq.infra import template as cfn
from ferrymq.infra.deploy_local import KEPT_TYPES, emulator_template, to_json


def _deployed() -> dict:
    return emulator_template(cfn.load(), code_uri="s3://b/function.zip", layer_uri="s3://b/layer.zip",
                             cluster_secret="s3cret", partitions=2)


def test_the_emulator_gets_the_tables_keys_bucket_and_front_end_as_written() -> None:
    source, deployed = cfn.load()["Resources"], _deployed()["Resources"]
    assert set(deployed) == {n for n, r in source.items() if r["Type"] in KEPT_TYPES}
    for name in ("QueuesTable", "CredentialsTable", "PartitionsTable", "DedupTable", "WorkersTable", "UsageBucket",
                 "ManagedSseKeyAlias", "CredentialsKeyAlias", "FrontendApi"):
        assert deployed[name] == to_json(source[name])
    assert not any(r["Type"].startswith(("AWS::ECS", "AWS::EC2", "AWS::AutoScaling")) for r in deployed.values())


def test_the_function_runs_without_a_vpc_with_the_lanes_secret_and_its_uploaded_code() -> None:
    function = _deployed()["Resources"]["FrontendFunction"]["Properties"]
    assert "VpcConfig" not in function and function["CodeUri"] == "s3://b/function.zip"
    variables = function["Environment"]["Variables"]
    assert variables["FERRYMQ_CLUSTER_SECRET"] == "s3cret" and variables["FERRYMQ_USAGE_ENABLED"] == "0"
    assert "FERRYMQ_USAGE_FIREHOSE_STREAM" not in variables
    assert function["Handler"] == cfn.load()["Resources"]["FrontendFunction"]["Properties"]["Handler"]


def test_nothing_left_refers_to_what_was_left_out() -> None:
    deployed = _deployed()
    text = json.dumps(deployed)
    for left_out in ("UsageDeliveryStream", "ClusterSecret", "FrontendSecurityGroup", "SubnetIds", "WorkerTask0"):
        assert left_out not in text
    defined = set(deployed["Resources"]) | set(deployed["Parameters"])
    refs = {m for m in _refs(deployed["Resources"]) if not m.startswith("AWS::")}
    assert refs <= defined
    assert deployed["Parameters"]["Partitions"]["Default"] == 2
    assert "Endpoint" in deployed["Outputs"]


def test_short_form_intrinsics_become_cloudformations_json_form() -> None:
    assert to_json(cfn.Intrinsic("GetAtt", "QueuesTable.Arn")) == {"Fn::GetAtt": ["QueuesTable", "Arn"]}
    assert to_json(cfn.Intrinsic("Select", [0, cfn.Intrinsic("Ref", "SubnetIds")])) == {
        "Fn::Select": [0, {"Ref": "SubnetIds"}]}
    assert to_json(cfn.Intrinsic("Sub", "${AWS::StackName}-x")) == {"Fn::Sub": "${AWS::StackName}-x"}


def _refs(value: object) -> set[str]:
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return {str(value["Ref"])}
        if set(value) == {"Fn::GetAtt"}:
            return {str(value["Fn::GetAtt"][0])}
        return set().union(*(_refs(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_refs(v) for v in value)) if value else set()
    return set()


def test_a_missing_emulator_is_one_line_and_status_1(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "ferrymq.infra.deploy_local", "--ministack", str(tmp_path / "no-such-ministack"),
         "--function-dir", str(tmp_path), "--layer-dir", str(tmp_path), "--data-dir", str(tmp_path / "data")],
        capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 1
    assert run.stderr.startswith("ferrymq deploy-local: ") and "no-such-ministack" in run.stderr
    assert len(run.stderr.splitlines()) == 1
