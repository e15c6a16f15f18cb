"""A stage sees only the params it declares, so DVC (which tracks exactly those keys)
cannot miss a change to one it reads.

`declared_view(section, "kg", ("kg.eval", "kg.slice.languages"))` is `section` with every
other key hidden: reading `view.detector` raises `UndeclaredParam` naming the key and the
declaration to extend. A declared key gives the real value (a whole sub-model if it is one).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel


class UndeclaredParam(AttributeError):
    """A stage read a params key outside its declaration (a programming error)."""


def covers(declared: str, key: str) -> bool:
    """`kg.eval` covers `kg.eval` and `kg.eval.max_items`, not `kg.evaluation`."""
    return key == declared or key.startswith(declared + ".")


class ParamsView:
    """Read-only attribute access to the declared part of a params model."""

    __slots__ = ("_model", "_path", "_declared", "_stage")

    def __init__(self, model: BaseModel, path: str, declared: tuple[str, ...], stage: str):
        object.__setattr__(self, "_model", model)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_declared", declared)
        object.__setattr__(self, "_stage", stage)

    def __getattr__(self, name: str) -> Any:
        return _read(
            getattr(self._model, name), f"{self._path}.{name}", self._declared, self._stage
        )

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"params are read-only ({self._path}.{name})")

    def __repr__(self) -> str:
        return f"ParamsView({self._path}: {', '.join(self._declared)})"


class MappingView(Mapping[str, Any]):
    """A dict-valued section (e.g. `mlm.phases`) with only its declared entries."""

    def __init__(
        self, mapping: Mapping[str, Any], path: str, declared: tuple[str, ...], stage: str
    ):
        self._mapping, self._path, self._declared, self._stage = mapping, path, declared, stage

    def __getitem__(self, name: str) -> Any:
        return _read(self._mapping[name], f"{self._path}.{name}", self._declared, self._stage)

    def __iter__(self) -> Iterator[str]:
        return (k for k in self._mapping if _visible(f"{self._path}.{k}", self._declared))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _visible(key: str, declared: tuple[str, ...]) -> bool:
    return any(covers(d, key) or covers(key, d) for d in declared)


def _read(value: Any, key: str, declared: tuple[str, ...], stage: str) -> Any:
    if any(covers(d, key) for d in declared):
        return value
    if any(covers(key, d) for d in declared):
        if isinstance(value, BaseModel):
            return ParamsView(value, key, declared, stage)
        if isinstance(value, Mapping):
            return MappingView(value, key, declared, stage)
    raise UndeclaredParam(
        f"{stage} reads params '{key}' but declares only {', '.join(declared)}; "
        "add it to the STAGE's params and run `paperline dvc sync`"
    )


def declared_view(section: BaseModel, path: str, declared: tuple[str, ...], stage: str) -> Any:
    """`section` (the model at `path`) as the stage may see it."""
    if any(covers(key, path) for key in declared):
        return section
    return ParamsView(section, path, declared, stage)
