"""template.yaml transforms with aws-sam-translator (what `sam deploy` and CloudFormation's SAM transform run)
into plain CloudFormation: the function behind its REST API, the storage cluster's ECS services untouched."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from samtranslator.model.exceptions import InvalidDocumentException
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

from ferrymq.infra import template as cfn

PARAMETERS = {
    "VpcId": "vpc-0123456789abcdef0",
    "SubnetIds": ["subnet-0a", "subnet-0b", "subnet-0c"],
    "WorkerAvailabilityZones": ["us-east-1a", "us-east-1b", "us-east-1c"],
    "ArtifactBucket": "ferrymq-artifacts",
    "WorkerImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/ferrymq-worker:0.1.0",
    "PushImageUri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/ferrymq-push:0.1.0",
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::Partition": "aws",
    "AWS::StackName": "ferrymq",
}


@pytest.fixture(autouse=True)
def region(monkeypatch: pytest.MonkeyPatch) -> None:
    # The translator writes ARNs for the session's region, as `sam deploy` does.
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


class NoManagedPolicies:
    """The template names no managed policy by name in a SAM ``Policies`` list: resolving one would be a
    change this test should notice (it would need IAM at deploy time)."""

    def load(self) -> dict[str, str]:
        raise AssertionError("the SAM transform asked for managed policy names")


def _raw_template() -> dict[str, Any]:
    """template.yaml as `sam package` hands it on: local code folders uploaded, their S3 URIs in place."""
    template = dict(yaml_parse(cfn.TEMPLATE_PATH.read_text()))
    for name, resource in template["Resources"].items():
        properties = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if isinstance(properties.get(key), str) and not properties[key].startswith("s3://"):
                properties[key] = f"s3://ferrymq-artifacts/packaged/{name}.zip"
    return template


def test_the_template_transforms_into_plain_cloudformation() -> None:
    template = _raw_template()
    output = transform(copy.deepcopy(template), PARAMETERS, NoManagedPolicies())
    assert "Transform" not in output
    resources = output["Resources"]
    types = {name: r["Type"] for name, r in resources.items()}
    # the function, with the handler that reads every event shape, behind the REST API and its stage
    function = resources["FrontendFunction"]
    assert function["Type"] == "AWS::Lambda::Function"
    assert function["Properties"]["Handler"] == "ferrymq.frontend.app.handler"
    assert types["FrontendApi"] == "AWS::ApiGateway::RestApi"
    assert "AWS::ApiGateway::Stage" in types.values() and "AWS::ApiGateway::Deployment" in types.values()
    paths = set(resources["FrontendApi"]["Properties"]["Body"]["paths"])
    assert paths == {"/", "/{account}/{queue}", "/queue/{region}/{account}/{queue}"}
    assert sum(t == "AWS::Lambda::Permission" for t in types.values()) >= len(paths)
    # the layer becomes a layer version of a hashed name, which the function refers to
    (layer,) = [name for name, t in types.items() if t == "AWS::Lambda::LayerVersion"]
    assert layer.startswith("FerryMQLayer") and function["Properties"]["Layers"] == [{"Ref": layer}]
    # the storage cluster and the rest pass through as written
    for name in ("WorkerService0", "WorkerTask0", "WorkerDiscovery0", "WorkerNamespace", "QueuesTable",
                 "UsageDeliveryStream", "UsageSparkApplication", "PushService", "PushTask", "PushTaskRole",
                 "PushSecurityGroup"):
        assert resources[name] == template["Resources"][name]


def test_a_broken_sam_resource_is_refused() -> None:
    template = _raw_template()
    template["Resources"]["FrontendFunction"]["Properties"]["Events"]["RootPost"]["Properties"]["Method"] = 7
    with pytest.raises(InvalidDocumentException):
        transform(template, PARAMETERS, NoManagedPolicies())
