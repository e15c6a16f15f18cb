"""prefect.yaml deploys one flow per area of dvc.yaml, and Prefect loads every entrypoint."""

import pytest
import yaml

from flows.dvc_flows import flow_names
from tests.conftest import REPO

DEPLOYMENTS = yaml.safe_load((REPO / "prefect.yaml").read_text())["deployments"]
MODULE = "flows/dvc_flows.py"


def test_prefect_yaml_deploys_every_flow_of_dvc_yaml():
    deployed = {d["entrypoint"] for d in DEPLOYMENTS}
    expected = {f"{MODULE}:{name}" for name in flow_names(REPO)}
    assert deployed == expected, (
        f"prefect.yaml: add deployments for {sorted(expected - deployed)}, "
        f"remove {sorted(deployed - expected)}"
    )


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=lambda d: d["name"])
def test_prefect_deploy_loads_the_entrypoint(deployment, monkeypatch):
    """The loader and parameter schema `prefect deploy` uses, from the repository root."""
    from prefect.flows import load_flow_from_entrypoint
    from prefect.utilities.callables import parameter_schema

    monkeypatch.delenv("PAPERLINE_ROOT", raising=False)
    monkeypatch.chdir(REPO)
    name = deployment["entrypoint"].rsplit(":", 1)[1]
    # `prefect deploy` would fall back to rebuilding a flow from the file's source when the
    # import fails; the entrypoint must import
    flow = load_flow_from_entrypoint(deployment["entrypoint"], use_placeholder_flow=False)
    assert (flow.name, flow.fn.__name__) == (name, name)
    assert list(parameter_schema(flow).properties) == ["root"]
    assert name == "pipeline" or name in deployment["tags"]
