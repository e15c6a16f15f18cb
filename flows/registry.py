"""Find a flow by name: `flows/<name>.py` defines a flow object called `<name>`."""

from __future__ import annotations

import importlib

from prefect import Flow

from tasks.core.errors import UserError


def load_flow(name: str) -> Flow:
    try:
        module = importlib.import_module(f"flows.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"flows.{name}":
            raise UserError(
                f"flow '{name}': no flows/{name}.py; try `pipeline` or an area name"
            ) from None
        raise
    found = getattr(module, name, None)
    if not isinstance(found, Flow):
        raise UserError(f"flow '{name}': flows/{name}.py defines no flow called {name}")
    return found
