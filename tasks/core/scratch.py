"""Scratch folders that make a killed training run resumable.

A run trains under its own folder (Ray Train restores from the snapshot it finds there).
The folder is kept while the run is unfinished and its fingerprint — the config less its
run-specific keys, plus the bytes of its inputs — is unchanged; otherwise it starts afresh.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tasks.core.io import read_json

FINGERPRINT_FILE = "fingerprint.json"
FINISHED_FILE = "finished"  # written when the run's outputs are committed
VOLATILE_KEYS = ("run_id", "tracking_uri", "pid_dir")  # differ between runs of the same work


def fingerprint(config: Mapping[str, Any], inputs: Sequence[Path]) -> str:
    """What decides a run's result: its config (less run ids) and its input files' bytes."""
    digest = hashlib.sha256()
    stable = {k: v for k, v in config.items() if k not in VOLATILE_KEYS}
    digest.update(json.dumps(stable, sort_keys=True).encode())
    for root in inputs:
        for path in sorted(p for p in Path(root).rglob("*") if p.is_file()) or [Path(root)]:
            digest.update(str(path.relative_to(root) if path != root else path.name).encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def prepare_scratch(folder: Path, digest: str) -> bool:
    """Keep an unfinished run with the same fingerprint (returns True: resuming), else wipe."""
    marker = folder / FINGERPRINT_FILE
    unfinished = marker.exists() and not (folder / FINISHED_FILE).exists()
    if unfinished and read_json(marker).get("fingerprint") == digest:
        return True
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    marker.write_text(json.dumps({"fingerprint": digest}), encoding="utf-8")
    return False
