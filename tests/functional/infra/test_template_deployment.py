"""template.yaml's deployment parts agree with the code: handler, API routes, build targets, tables."""

from __future__ import annotations

import re
from pathlib import Path

from chalice import Chalice

from ferrymq.infra import template as cfn
from tests.support.dockerfile import exec_form

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
    assert set(tables) == {"QueuesTable", "CredentialsTable", "PartitionsTable", "DedupTable", "WorkersTable",
                           "EventSourceMappingsTable", "DashboardSessionsTable"}
    assert resources["ManagedSseKeyAlias"]["Properties"]["AliasName"] == "alias/ferrymq/managed-sse"
    assert list(cfn.resources_of_type(cfn.load(), "AWS::S3::Bucket")) == ["UsageBucket"]


def test_repository_root_is_the_template_folder() -> None:
    assert (REPO / "pyproject.toml").is_file()
    assert Path(cfn.TEMPLATE_PATH).name == "template.yaml"


def test_the_storage_cluster_is_three_ecs_services_each_with_a_log_volume_that_outlives_task_and_instance() -> None:
    resources = cfn.load()["Resources"]
    # the cluster runs the three worker services and the push service, nothing else
    all_services = {n for n, r in resources.items() if r["Type"] == "AWS::ECS::Service"}
    assert all_services == {"WorkerService0", "WorkerService1", "WorkerService2", "PushService"}
    services = {n: r for n, r in resources.items() if r["Type"] == "AWS::ECS::Service" and n.startswith("Worker")}
    groups = {n: r for n, r in resources.items() if r["Type"] == "AWS::AutoScaling::AutoScalingGroup"}
    volumes = {n: r for n, r in resources.items() if r["Type"] == "AWS::EC2::Volume"}
    # then one service of one task per worker identity, never two at once, each placed on its slot's instance
    assert sorted(services) == ["WorkerService0", "WorkerService1", "WorkerService2"]
    for i, (_, service) in enumerate(sorted(services.items())):
        props = service["Properties"]
        assert props["DesiredCount"] == 1
        assert props["DeploymentConfiguration"] == {"MinimumHealthyPercent": 0, "MaximumPercent": 100}
        assert props["PlacementConstraints"] == [{"Type": "memberOf",
                                                  "Expression": f"attribute:ferrymq-slot == {i}"}]
        (subnet,) = props["NetworkConfiguration"]["AwsvpcConfiguration"]["Subnets"]
        assert subnet.name == "Select" and subnet.value[0] == i
        (registry,) = props["ServiceRegistries"]
        assert registry["RegistryArn"].value == f"WorkerDiscovery{i}.Arn"
        task = resources[props["TaskDefinition"].value]["Properties"]
        init, worker = task["ContainerDefinitions"]
        # the worker runs the image's entry point as worker-<i>, after the idempotent cluster init
        assert worker["Command"] == ["--partitions", "", "--worker-id", f"worker-{i}"]
        assert init["EntryPoint"] == ["python", "-m", "ferrymq.infra.cluster_init"] and not init["Essential"]
        assert worker["DependsOn"] == [{"ContainerName": "cluster-init", "Condition": "SUCCESS"}]
        # its logs on the instance's /var/lib/ferrymq, where the slot's volume is mounted
        assert task["Volumes"] == [{"Name": "logs", "Host": {"SourcePath": "/var/lib/ferrymq"}}]
        assert worker["MountPoints"] == [{"SourceVolume": "logs", "ContainerPath": "/var/lib/ferrymq"}]
        assert worker["User"] == "10001:10001" and worker["ReadonlyRootFilesystem"] is True
        assert "/health/live" in worker["HealthCheck"]["Command"][-1]
    # and the instances: three groups of exactly one, in the first three subnets, tagged with their slot
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
    # and an instance mounts its slot's volume and joins the cluster with its slot as an attribute
    user_data = repr(resources["WorkerLaunchTemplate"]["Properties"]["LaunchTemplateData"]["UserData"])
    assert "tags/instance/ferrymq-slot" in user_data and "mount -o noatime" in user_data
    assert "ECS_INSTANCE_ATTRIBUTES" in user_data and "chown 10001:10001 /var/lib/ferrymq" in user_data


def test_the_worker_task_runs_the_images_health_check() -> None:
    # The task's health check is the image's own (storage_workers/Dockerfile), word for word.
    task = cfn.load()["Resources"]["WorkerTask0"]["Properties"]
    worker = task["ContainerDefinitions"][1]
    assert worker["HealthCheck"]["Command"] == ["CMD", *exec_form("HEALTHCHECK")]


def test_the_worker_roles_grant_only_what_the_tasks_call() -> None:
    resources = cfn.load()["Resources"]
    task_role = resources["WorkerTaskRole"]["Properties"]
    (policy,) = task_role["Policies"]
    actions = {a for statement in policy["PolicyDocument"]["Statement"] for a in statement["Action"]}
    assert all(a.startswith("dynamodb:") for a in actions)
    assert "ManagedPolicyArns" not in task_role
    (start_policy,) = resources["WorkerExecutionRole"]["Properties"]["Policies"]
    for statement in start_policy["PolicyDocument"]["Statement"]:
        # Only the registry token is account-wide, as ECR defines it.
        assert statement["Resource"] != "*" or statement["Action"] == ["ecr:GetAuthorizationToken"]
