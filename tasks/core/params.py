"""Typed params.yaml: every tunable, validated at load, errors that name the key path.

`runtime` and `llm` (tasks/core/llm_params.py) are core's; every other top-level section
belongs to the area of that name, whose `tasks/<area>/params.py` registers its model as
`SECTION` (core imports no area by name).
"""

from __future__ import annotations

import difflib
import json
import types
import typing
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, create_model
from ruamel.yaml import YAML, YAMLError

from tasks.core.areas import area_modules
from tasks.core.errors import ParamsError
from tasks.core.llm_params import LLMParams
from tasks.core.paths import repo_root
from tasks.core.strict_model import StrictModel


class RayParams(StrictModel):
    num_cpus: int | None = Field(default=None, ge=1, description="local Ray CPUs; null = all")
    object_store_memory_mb: int | None = Field(default=None, ge=75)
    max_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="retries of a Ray task or Tune trial whose worker died; then the stage fails",
    )


class MlflowParams(StrictModel):
    tracking_uri: str = "sqlite:///mlruns/mlflow.db"
    artifact_root: str = "mlruns/artifacts"


class PrefectParams(StrictModel):
    retries: int = Field(default=1, ge=0)
    retry_delay_seconds: float = Field(default=10, ge=0)


class ServiceParams(StrictModel):
    host: str = "127.0.0.1"
    port: int = Field(ge=1, le=65535)
    start_timeout_seconds: float = Field(default=60, gt=0)


class OxigraphServiceParams(ServiceParams):
    port: int = Field(default=7878, ge=1, le=65535)
    location: str = ".paperline/oxigraph"


class MlflowServiceParams(ServiceParams):
    port: int = Field(default=5000, ge=1, le=65535)


class PrefectServiceParams(ServiceParams):
    port: int = Field(default=4200, ge=1, le=65535)


class ServicesParams(StrictModel):
    oxigraph: OxigraphServiceParams = OxigraphServiceParams()
    mlflow: MlflowServiceParams = MlflowServiceParams()
    prefect: PrefectServiceParams = PrefectServiceParams()


class RuntimeParams(StrictModel):
    ray: RayParams = RayParams()
    mlflow: MlflowParams = MlflowParams()
    prefect: PrefectParams = PrefectParams()
    services: ServicesParams = ServicesParams()


class Params(StrictModel):
    """The whole params.yaml: `runtime`, the core LLM service `llm`, then one section per
    area (`params_model()` adds them); a loaded instance has an attribute per area, e.g.
    `params.kg`."""

    runtime: RuntimeParams = RuntimeParams()
    llm: LLMParams = LLMParams()


def area_sections() -> dict[str, tuple[type[StrictModel], bool]]:
    """Area name → (its params model, required), from every `tasks/<area>/params.py` that
    registers a SECTION (and SECTION_REQUIRED when params.yaml must hold it)."""
    return {
        area: (module.SECTION, getattr(module, "SECTION_REQUIRED", False))
        for area, module in area_modules("params").items()
        if hasattr(module, "SECTION")
    }


@cache
def params_model() -> type[Params]:
    """Params with each area's section; an optional section defaults to its model's."""
    fields = {
        area: (model, ... if required else model())
        for area, (model, required) in area_sections().items()
    }
    return create_model("Params", __base__=Params, **fields)


def load_params(path: Path | None = None) -> Params:
    """Read and validate params.yaml (default: the repository's)."""
    path = path or repo_root() / "params.yaml"
    try:
        raw = parse_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ParamsError(
            f"{path}: not found; run from the repository or set PAPERLINE_ROOT"
        ) from None
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ParamsError(f"{path.name}: {where}invalid YAML ({problem})") from None
    return parse_params(raw if raw is not None else {}, source=path.name)


def parse_yaml(text: str) -> Any:
    """YAML 1.2, the way DVC reads params.yaml: both then agree that `off` or `no` is a
    string and `1e-3` a number (YAML 1.1 says False and a string), also after DVC rewrites
    the file for `dvc exp run -S`."""
    return YAML(typ="safe", pure=True).load(text)


def parse_params(raw: Any, source: str = "params.yaml") -> Params:
    """Validate an in-memory mapping (tests feed params this way)."""
    if not isinstance(raw, dict):
        raise ParamsError(f"{source}: expected a mapping of sections at the top level")
    model = params_model()
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ParamsError(f"{source}: {describe_error(first, model)}") from None


def describe_error(error: dict[str, Any], model: type[BaseModel]) -> str:
    """`corpus.ingest.min_chars: expected an integer ≥ 0, got "ten"` for one pydantic error."""
    loc = [str(part) for part in error["loc"]]
    key_path = ".".join(loc) or "(top level)"
    kind = error["type"]
    if kind == "extra_forbidden":
        parent = _model_at(model, loc[:-1])
        allowed = sorted(parent.model_fields) if parent else []
        close = difflib.get_close_matches(loc[-1], allowed, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"allowed keys: {', '.join(allowed)}"
        return f"{key_path}: unknown key; {hint}"
    if kind == "missing":
        return f"{key_path}: required key is missing"
    if kind == "value_error":  # a model's own cross-field check
        return f"{key_path}: {error['msg'].removeprefix('Value error, ')}"
    expected = _expected(model, loc)
    if expected is None:
        return f"{key_path}: {error['msg']}"
    return f"{key_path}: expected {expected}, got {_show(error.get('input'))}"


def _model_at(model: type[BaseModel], loc: list[str]) -> type[BaseModel] | None:
    for part in loc:
        field = model.model_fields.get(part)
        if field is None:
            return None
        nested = _submodel(field.annotation)
        if nested is None:
            return None
        model = nested
    return model


def _submodel(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _expected(model: type[BaseModel], loc: list[str]) -> str | None:
    parent = _model_at(model, loc[:-1])
    field = parent.model_fields.get(loc[-1]) if parent and loc else None
    if field is None:
        return None
    text = _type_words(field.annotation)
    nullable = type(None) in typing.get_args(field.annotation)
    for meta in field.metadata:
        for attr, symbol in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            if (bound := getattr(meta, attr, None)) is not None:
                text += f" {symbol} {bound}"
    return text + (" or null" if nullable else "")


_WORDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _type_words(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_words(a) for a in args if a is not type(None))
    if origin in (list, tuple):
        return "a list"
    if origin is dict:
        return "a mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "a mapping"
    return _WORDS.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _show(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)
