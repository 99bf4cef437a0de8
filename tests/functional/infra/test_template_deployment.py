"""template.yaml's deployment parts agree with the code: handler, API routes, build targets, tables."""

from __future__ import annotations

import re
from pathlib import Path

from chalice import Chalice

from ferrymq.infra import template as cfn

REPO = cfn.TEMPLATE_PATH.parent


def test_front_end_handler_is_the_event_handler() -> None:
    # given the function's Handler, when imported, then it names the handler of every event shape (not the
    # Chalice app, which reads REST API events only)
    function = cfn.load()["Resources"]["FrontendFunction"]["Properties"]
    module_name, _, attribute = function["Handler"].rpartition(".")
    module = __import__(module_name, fromlist=[attribute])
    from ferrymq.frontend.app import handler

    assert getattr(module, attribute) is handler
    assert not isinstance(handler, Chalice)


def test_api_routes_match_the_chalice_routes() -> None:
    # given the API events of the function and the routes the Chalice app declares
    function = cfn.load()["Resources"]["FrontendFunction"]["Properties"]
    api_paths = {event["Properties"]["Path"] for event in function["Events"].values()}
    from ferrymq.frontend.app import app

    # then API Gateway forwards exactly the paths the app serves
    assert api_paths == set(app.routes)


def test_every_makefile_build_method_has_its_target() -> None:
    # given resources built with the makefile build method
    resources = cfn.load()["Resources"]
    built = [name for name, res in resources.items() if res.get("Metadata", {}).get("BuildMethod") == "makefile"]
    assert built
    # then the Makefile at their CodeUri/ContentUri (the repository root) has build-<LogicalId>
    targets = set(re.findall(r"^(build-[A-Za-z0-9]+):", (REPO / "Makefile").read_text(), flags=re.MULTILINE))
    assert {f"build-{name}" for name in built} <= targets


def test_layer_requirements_exist_and_the_layer_code_is_in_python_folder() -> None:
    assert (REPO / "layers" / "ferrymq" / "requirements.txt").is_file()
    assert (REPO / "layers" / "ferrymq" / "python" / "ferrymq" / "__init__.py").is_file()


def test_bootstrapped_resources_keep_their_names() -> None:
    # the local stack reads these from the template; deployment additions must leave them be
    resources = cfn.load()["Resources"]
    tables = cfn.resources_of_type(cfn.load(), "AWS::DynamoDB::Table")
    assert set(tables) == {"QueuesTable", "CredentialsTable", "PartitionsTable", "DedupTable", "WorkersTable"}
    assert resources["ManagedSseKeyAlias"]["Properties"]["AliasName"] == "alias/ferrymq/managed-sse"
    assert list(cfn.resources_of_type(cfn.load(), "AWS::S3::Bucket")) == ["UsageBucket"]


def test_repository_root_is_the_template_folder() -> None:
    assert (REPO / "pyproject.toml").is_file()
    assert Path(cfn.TEMPLATE_PATH).name == "template.yaml"


def test_the_storage_cluster_is_three_workers_each_with_a_log_volume_that_outlives_its_instance() -> None:
    resources = cfn.load()["Resources"]
    groups = {n: r for n, r in resources.items() if r["Type"] == "AWS::AutoScaling::AutoScalingGroup"}
    volumes = {n: r for n, r in resources.items() if r["Type"] == "AWS::EC2::Volume"}
    # then three groups of exactly one instance each, in the first three subnets
    assert sorted(groups) == ["WorkerGroup0", "WorkerGroup1", "WorkerGroup2"]
    for i, (_, group) in enumerate(sorted(groups.items())):
        props = group["Properties"]
        assert (props["MinSize"], props["MaxSize"]) == ("1", "1")
        (subnet,) = props["VPCZoneIdentifier"]
        assert subnet.name == "Select" and subnet.value[0] == i and subnet.value[1].value == "SubnetIds"
        assert {"Key": "ferrymq-slot", "Value": str(i), "PropagateAtLaunch": True} in props["Tags"]
    # and three volumes kept when the stack or an instance goes, tagged with their slot
    assert len(volumes) == 3
    for volume in volumes.values():
        assert volume["DeletionPolicy"] == volume["UpdateReplacePolicy"] == "Retain"
        assert volume["Properties"]["Encrypted"] is True
    # and the worker reads its slot from its tags and runs `ferrymq cluster init` before it starts
    user_data = repr(resources["WorkerLaunchTemplate"]["Properties"]["LaunchTemplateData"]["UserData"])
    assert "tags/instance/ferrymq-slot" in user_data and "ferrymq cluster init" in user_data
    assert "--worker-id worker-$SLOT" in user_data
