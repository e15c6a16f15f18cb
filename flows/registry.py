"""Find a flow by name: `pipeline`, or an area that has stages in dvc.yaml."""

from __future__ import annotations

from prefect import Flow

from flows import dvc_flows
from tasks.core.errors import UserError


def load_flow(name: str) -> Flow:
    names = dvc_flows.flow_names()
    if name not in names:
        raise UserError(
            f"flow '{name}': no such flow; the flows are {', '.join(names)} "
            "(`pipeline`, then one per area with stages in dvc.yaml)"
        )
    return getattr(dvc_flows, name)
