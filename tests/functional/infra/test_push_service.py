"""template.yaml's push service (python -m ferrymq.frontend.push as an ECS service): what it runs, what its role
may do, and where its security group lets it connect."""

from __future__ import annotations

from typing import Any

from ferrymq.infra import template as cfn
from ferrymq.infra.template import Intrinsic

FRONTEND_READ_TABLES = {"QueuesTable", "CredentialsTable", "PartitionsTable", "DedupTable", "WorkersTable"}
WORKER_ADMIN_PORT = 7180


def _resources() -> dict[str, Any]:
    return cfn.load()["Resources"]


def _statements(role: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for policy in role["Properties"]["Policies"] for s in policy["PolicyDocument"]["Statement"]]


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _grants(role: dict[str, Any]) -> set[tuple[str, str]]:
    """(action, resource) pairs the role allows, a resource named by its logical id where it is one."""
    pairs = set()
    for statement in _statements(role):
        assert statement["Effect"] == "Allow" and "NotAction" not in statement and "NotResource" not in statement
        for action in _listed(statement["Action"]):
            for resource in _listed(statement["Resource"]):
                if isinstance(resource, Intrinsic) and resource.name == "GetAtt":
                    name = resource.value.split(".")[0]
                elif isinstance(resource, Intrinsic):
                    name = str(resource.value)
                else:
                    name = resource
                pairs.add((action, name))
    return pairs


def test_two_push_tasks_run_the_push_entry_point_across_the_workers_zones() -> None:
    resources = _resources()
    service = resources["PushService"]["Properties"]
    assert service["DesiredCount"] == 2 and service["Cluster"].value == "WorkerCluster"
    subnets = service["NetworkConfiguration"]["AwsvpcConfiguration"]["Subnets"]
    worker_subnets = [resources[f"WorkerService{i}"]["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"]
                      ["Subnets"][0] for i in range(3)]
    assert subnets == worker_subnets
    assert service["NetworkConfiguration"]["AwsvpcConfiguration"]["SecurityGroups"][0].value == "PushSecurityGroup"
    task = resources[service["TaskDefinition"].value]["Properties"]
    (container,) = task["ContainerDefinitions"]
    assert container["Image"].value == "PushImageUri"
    assert container["User"] == "10001:10001" and container["ReadonlyRootFilesystem"] is True
    assert container["LogConfiguration"]["Options"]["awslogs-group"].value == "PushLogGroup"
    env = {e["Name"]: e["Value"] for e in container["Environment"]}
    assert env["FERRYMQ_TABLE_PREFIX"].value == "TablePrefix" and "FERRYMQ_PUSH_LEASE_SECONDS" in env
    # only public destinations: no allow-list of private networks
    assert "FERRYMQ_PUSH_ALLOWED_NETWORKS" not in env
    # the cluster secret from Secrets Manager, as the workers get it
    (secret,) = container["Secrets"]
    worker = resources["WorkerTask0"]["Properties"]["ContainerDefinitions"][1]
    assert secret == worker["Secrets"][0]


def test_the_push_task_role_grants_only_what_the_pollers_call() -> None:
    grants = _grants(_resources()["PushTaskRole"])
    actions = {action for action, _ in grants}
    # no wildcards, and nothing that writes to S3, Firehose or IAM
    assert not any("*" in action for action in actions)
    assert not any(action.split(":")[0] in ("s3", "firehose", "iam", "sts", "secretsmanager") for action in actions)
    assert not any(resource == "*" for _, resource in grants)
    # reads of the front end's tables; writes only to the mappings' table
    dynamodb = {(a, r) for a, r in grants if a.startswith("dynamodb:")}
    assert {r for _, r in dynamodb} == FRONTEND_READ_TABLES | {"EventSourceMappingsTable"}
    writes = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:TransactWriteItems",
              "dynamodb:BatchWriteItem"}
    assert {r for a, r in dynamodb if a in writes} == {"EventSourceMappingsTable"}
    # the two keys, to open messages and sealed secrets, without Encrypt
    kms = {(a, r) for a, r in grants if a.startswith("kms:")}
    assert kms == {(a, k) for a in ("kms:Decrypt", "kms:GenerateDataKey") for k in ("ManagedSseKey", "CredentialsKey")}
    # and the account's functions, nothing else in Lambda
    (lam,) = [(a, r) for a, r in grants if a.startswith("lambda:")]
    assert lam[0] == "lambda:InvokeFunction" and lam[1].endswith(":${AWS::AccountId}:function:*")
    assert actions <= {a for a, _ in dynamodb | kms} | {"lambda:InvokeFunction"}


def test_the_push_security_group_reaches_the_workers_client_port_and_the_web_only() -> None:
    resources = _resources()
    group = resources["PushSecurityGroup"]["Properties"]
    egress = {(r["IpProtocol"], str(getattr(r["FromPort"], "value", r["FromPort"])),
               str(getattr(r["ToPort"], "value", r["ToPort"])),
               getattr(r.get("DestinationSecurityGroupId"), "value", r.get("CidrIp")))
              for r in group["SecurityGroupEgress"]}
    assert egress == {("tcp", "WorkerBasePort", "WorkerBasePort", "WorkerSecurityGroup"),
                      ("tcp", "443", "443", "0.0.0.0/0"), ("tcp", "80", "80", "0.0.0.0/0")}
    # the workers let it in on their client port alone: not their admin port, nor any wider range
    from_push = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::EC2::SecurityGroupIngress"
                 and getattr(r["Properties"].get("SourceSecurityGroupId"), "value", None) == "PushSecurityGroup"]
    (ingress,) = from_push
    assert ingress["GroupId"].value == "WorkerSecurityGroup" and ingress["IpProtocol"] == "tcp"
    assert ingress["FromPort"].value == ingress["ToPort"].value == "WorkerBasePort"
    # and nothing else opens the push service's group into the workers (replication is worker to worker)
    replication = resources["WorkerIngressFromWorkers"]["Properties"]
    assert replication["SourceSecurityGroupId"].value == "WorkerSecurityGroup"
    assert not any(isinstance(r["FromPort"], int) and r["FromPort"] <= WORKER_ADMIN_PORT <= r["ToPort"]
                   for r in group["SecurityGroupEgress"])


def test_the_push_execution_role_reads_only_the_cluster_secret_and_writes_only_its_log_group() -> None:
    grants = _grants(_resources()["PushExecutionRole"])
    assert {r for a, r in grants if a == "secretsmanager:GetSecretValue"} == {"ClusterSecret"}
    assert {r for a, r in grants if a.startswith("logs:")} == {"${PushLogGroup.Arn}:*"}
