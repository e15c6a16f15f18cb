"""The areas: every package under tasks/ but core, found by name, so core imports none."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import tasks


def area_modules(name: str) -> dict[str, ModuleType]:
    """Area → its module `tasks.<area>.<name>`, for each area that has one (sorted by area)."""
    found = {}
    for package in sorted(pkgutil.iter_modules(tasks.__path__), key=lambda m: m.name):
        if not package.ispkg or package.name == "core":
            continue
        dotted = f"tasks.{package.name}.{name}"
        try:
            found[package.name] = importlib.import_module(dotted)
        except ModuleNotFoundError as exc:
            if exc.name != dotted:
                raise  # the module exists but imports something missing
    return found
