"""Where the project lives on disk."""

import os
from pathlib import Path


def repo_root(start: Path | None = None) -> Path:
    """The folder holding dvc.yaml and params.yaml: $PAPERLINE_ROOT, else the nearest above cwd."""
    if env := os.environ.get("PAPERLINE_ROOT"):
        return Path(env).resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "dvc.yaml").is_file() and (folder / "params.yaml").is_file():
            return folder
    return here


def state_dir(root: Path | None = None) -> Path:
    """`.paperline/`: pid files, service logs and local service state (git-ignored)."""
    path = (root or repo_root()) / ".paperline"
    path.mkdir(parents=True, exist_ok=True)
    return path
