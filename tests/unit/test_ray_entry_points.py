"""Stage code starts Ray work only through tasks/core's helpers, which carry the retry
budget and turn a dead worker into one line (a raw `ray.remote` retries as Ray's default,
and Ray Data retries a dead worker forever)."""

import ast
from pathlib import Path

from tests.conftest import REPO

HELPERS = {"tasks/core/ray_runtime.py", "tasks/core/ray_train.py"}
# a call whose dotted name ends like one of these starts Ray work; in-memory dataset
# constructors (ray.data.from_items / from_numpy) start none and stay allowed
FORBIDDEN = (
    "ray.remote",
    "ray.get",
    "ray.wait",
    "map_batches",
    "flat_map",
    "Tuner",
    "Tuner.restore",
    "TorchTrainer",
    "tune.run",
)
FORBIDDEN_PREFIXES = ("ray.data.read_",)


def dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


def ray_calls(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        name = dotted(node.func)
        if any(name == f or name.endswith("." + f) for f in FORBIDDEN) or name.startswith(
            FORBIDDEN_PREFIXES
        ):
            where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
            found.append(f"{where}:{node.lineno}: {name}(...)")
    return found


def test_only_the_core_helpers_start_ray_work():
    modules = [p for p in (REPO / "tasks").rglob("*.py") if str(p.relative_to(REPO)) not in HELPERS]
    offenders = [call for path in modules for call in ray_calls(path)]
    assert not offenders, "start Ray work through tasks.core.ray_runtime:\n" + "\n".join(offenders)


def test_the_scan_sees_a_raw_ray_call(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""Tuner(driver) in a docstring is no call."""\nimport ray\n'
        "f = ray.remote(print)\nray.get(f.remote())\nds.map_batches(f)\n"
    )
    assert [call.split(": ")[1] for call in ray_calls(sample)] == [
        "ray.remote(...)",
        "ray.get(...)",
        "ds.map_batches(...)",
    ]
