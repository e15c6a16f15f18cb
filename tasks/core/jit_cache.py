"""numba's compiled-function cache, kept in a folder the project owns.

librosa compiles its numba functions with `cache=True`, by default into
`site-packages/librosa/**/__pycache__`. Several processes compiling the same function at once
can leave that cache pointing at the wrong machine code, and every later load segfaults.
Here the cache lives in `.paperline/numba-cache/` (NUMBA_CACHE_DIR, read by numba when it is
imported, so it is set before any stage imports it and inherited by Ray's workers), one
process fills it before the workers fan out (`ray_runtime.map_table(..., jit_warmup=True)`),
and `paperline doctor --clear-jit-cache` empties it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tasks.core.paths import repo_root

ENV = "NUMBA_CACHE_DIR"
CACHE_SUFFIXES = (".nbi", ".nbc")


def project_cache(root: Path | None = None) -> Path:
    return (root or repo_root()) / ".paperline" / "numba-cache"


def use_project_cache(root: Path | None = None) -> Path:
    """Point numba at the project's folder unless the user chose one; the folder in use."""
    os.environ.setdefault(ENV, str(project_cache(root)))
    return Path(os.environ[ENV])


def in_tree_caches() -> list[Path]:
    """Cache files numba wrote next to installed packages' sources (before the project owned
    the cache, or from a process started without NUMBA_CACHE_DIR)."""
    import librosa

    package = Path(librosa.__file__).parent
    return sorted(p for p in package.rglob("__pycache__/*") if p.suffix in CACHE_SUFFIXES)


def cache_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.suffix in CACHE_SUFFIXES)


def clear(folder: Path) -> int:
    """Remove the project's cache folder and librosa's in-tree cache files; how many files."""
    removed = cache_files(folder) + in_tree_caches()
    shutil.rmtree(folder, ignore_errors=True)
    for path in removed:
        path.unlink(missing_ok=True)
    return len(removed)
