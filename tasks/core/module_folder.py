"""A torch module as a folder: `config.json` (its config dataclass) + `model.safetensors`.

Like a transformers folder, without pickle: the config rebuilds the architecture, the
safetensors file fills its weights. Each file is written atomically.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tasks.core.errors import InputError
from tasks.core.io import atomic_path

WEIGHTS_FILE, CONFIG_FILE = "model.safetensors", "config.json"


def save_module(module: Any, folder: Path) -> None:
    """Write `module.config` (a dataclass) and the module's weights into `folder`."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
    with atomic_path(folder / WEIGHTS_FILE) as temp:
        save_file(state, str(temp))
    with atomic_path(folder / CONFIG_FILE) as temp:
        temp.write_text(json.dumps(asdict(module.config), indent=2) + "\n", encoding="utf-8")


def load_module(folder: Path, build: Callable[[dict[str, Any]], Any], not_one: str) -> Any:
    """`build(config)` with the folder's weights, in eval mode; an unreadable folder is one
    line: `<folder>: <not_one> (<why>)`."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        module = build(json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8")))
        module.load_state_dict(load_file(str(folder / WEIGHTS_FILE)))
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, SafetensorError) as exc:
        raise InputError(f"{folder}: {not_one} ({exc})") from None
    return module.eval()
