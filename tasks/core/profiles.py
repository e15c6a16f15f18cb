"""Named params profiles: overlays of params.yaml kept in profiles/<name>.yaml.

params.yaml holds the small embedded default (the whole pipeline within 30 minutes on two
cores); a profile sets larger values on the same code path. Applying one edits params.yaml
in place with its comments kept, so DVC sees ordinary params changes and re-runs exactly the
stages that read them (`dvc repro`, or `dvc exp run` to keep it as an experiment).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from tasks.core.errors import UserError
from tasks.core.io import atomic_path
from tasks.core.params import parse_params, parse_yaml

PROFILES = "profiles"


def profile_names(root: Path) -> list[str]:
    return sorted(path.stem for path in (root / PROFILES).glob("*.yaml"))


def load_profile(root: Path, name: str) -> dict[str, Any]:
    path = root / PROFILES / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(profile_names(root)) or "none"
        raise UserError(f"profile {name!r}: no {PROFILES}/{name}.yaml (profiles here: {known})")
    overlay = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(overlay, dict):
        raise UserError(f"{PROFILES}/{name}.yaml: expected a mapping of params.yaml sections")
    return overlay


def _flow(value: Any) -> str:
    """A value as one line of YAML flow style (how params.yaml writes short lists)."""
    return (
        yaml.safe_dump(value, default_flow_style=True, width=1 << 16, sort_keys=False)
        .strip()
        .removesuffix("\n...")
    )


def _set_in_line(line: str, column: int, value: Any) -> str:
    """Replace the value starting at `column`, keeping the line's comment where it was."""
    body, hash_mark, comment = line[column:].partition(" #")
    new = line[:column] + _flow(value)
    if not hash_mark:
        return new
    pad = max(1, column + len(body) + 1 - len(new))
    return f"{new}{' ' * pad}#{comment}"


def _overlay(
    base: CommentedMap, overlay: dict, where: str, source: str, lines: list[str]
) -> list[str]:
    changed = []
    for key, value in overlay.items():
        path = f"{where}{key}"
        if key not in base:
            raise UserError(f"{source}: {path} is not a key of params.yaml; fix the profile")
        if isinstance(value, dict) and isinstance(base[key], CommentedMap):
            if not base[key].fa.flow_style():
                changed += _overlay(base[key], value, f"{path}.", source, lines)
                continue
            # a one-line {…} mapping is rewritten whole, with the profile's keys merged in
            unknown = sorted(set(value) - set(base[key]))
            if unknown:
                raise UserError(
                    f"{source}: {path}.{unknown[0]} is not a key of params.yaml; fix the profile"
                )
            value = {**base[key], **value}
        if base[key] == value:
            continue
        key_line, _ = base.lc.key(key)
        value_line, column = base.lc.value(key)
        if (
            value_line != key_line
            or isinstance(base[key], CommentedMap | CommentedSeq)
            and (not base[key].fa.flow_style())
        ):
            raise UserError(
                f"{source}: {path} spans several lines in params.yaml; "
                "write it on one line there (flow style) to set it from a profile"
            )
        lines[key_line] = _set_in_line(lines[key_line], column, value)
        changed.append(path)
    return changed


def apply_profile(root: Path, name: str) -> list[str]:
    """Write profile `name` into root/params.yaml; returns the key paths it changed.

    Only the changed values' lines are rewritten, so comments and layout stay as they are.
    """
    overlay = load_profile(root, name)
    params_file = root / "params.yaml"
    text = params_file.read_text(encoding="utf-8")
    lines = text.splitlines()
    changed = _overlay(YAML().load(text), overlay, "", f"{PROFILES}/{name}.yaml", lines)
    new_text = "\n".join(lines) + "\n"
    parse_params(parse_yaml(new_text), source=f"params.yaml with profile {name}")
    with atomic_path(params_file) as temp:
        temp.write_text(new_text, encoding="utf-8")
    return changed
