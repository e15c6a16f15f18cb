"""cmipref.generate: candidate clips per prompt with known faults, pairs, and the truth.

Each prompt gets `candidates` clips: the clean one and degraded renderings, each with one
fault (sometimes two) of random kind and severity (tasks/cmipref/degrade.py); synthesized
prompts draw a new melody per candidate, real clips are degraded as they are. Prompts are
split into a pool (pseudo-labelled by cmipref.label), a truth-labelled fine-tune split and
a held-out test split (the CMI-Pref analogue). Pairs are candidates of one prompt whose
true quality differs by at least `min_quality_gap`: all of them on test prompts, a sample
elsewhere. The truth (per clip: faults, musicality, alignment) goes to its own table, read
only by training's fine-tune split and by evaluation, never by the labelling judges.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tasks.cmipref.audio import decode, flac_bytes
from tasks.cmipref.degrade import FAULTS, degrade, penalties
from tasks.cmipref.music import MusicDescription, synthesize
from tasks.cmipref.params import CmiprefParams, GenerateParams
from tasks.cmipref.sources import clip_seed, source_clips
from tasks.core.errors import InputError
from tasks.core.io import Folder
from tasks.core.progress import get_logger
from tasks.core.ray_runtime import collect, map_table
from tasks.core.stage import Output, Stage, StageContext

log = get_logger("paperline.cmipref.generate")
AUDIO = "data/interim/cmipref/audio"
PROMPT_COLUMNS = ("prompt_id", "split", "modality", "prompt", "lyrics", "reference_audio")


def audio_file(root: Path, path: str) -> Path:
    """A table's repo-relative audio path, found under the audio folder `root`."""
    return root / Path(path).relative_to(AUDIO)


def fault_plans(params: GenerateParams, rng: np.random.Generator) -> list[list[tuple[str, float]]]:
    """One fault list per candidate: none for the first, one or two for the others."""
    low, high = params.severity
    plans: list[list[tuple[str, float]]] = [[]]
    for _ in range(params.candidates - 1):
        count = 2 if rng.random() < params.second_fault_rate else 1
        names = rng.choice(FAULTS, size=count, replace=False)
        plans.append([(str(n), round(float(rng.uniform(low, high)), 3)) for n in names])
    return plans


def split_of(params: GenerateParams, rng: np.random.Generator) -> list[str]:
    labels = ["test"] * params.test_prompts + ["finetune"] * params.finetune_prompts
    labels += ["pool"] * (params.prompts - len(labels))
    return [str(s) for s in rng.permutation(labels)]


def render_batch(batch: pa.Table, sample_rate: int, seconds: float) -> pa.Table:
    """One Ray task (map_table): each prompt's candidates as FLAC (its faults applied), drawn
    from the prompt's own seed (the same clips whatever the batching)."""
    rows: dict[str, list[Any]] = {"prompt_id": [], "candidate": [], "flac": [], "faults": []}
    for plan in batch.to_pylist():
        clean = decode(plan["clean"], sample_rate, plan["prompt_id"])
        seed = plan["seed"]
        for candidate, faults in enumerate(json.loads(plan["faults"])):
            audio = clean
            if plan["description"] and candidate:  # a synthesized prompt: a new melody
                description = MusicDescription(**json.loads(plan["description"]))
                audio = synthesize(description, seconds, sample_rate, seed + 7919 * candidate)
            faults = [tuple(f) for f in faults]
            if faults:
                audio = degrade(audio, sample_rate, faults, seed + 104729 * candidate)
            rows["prompt_id"].append(plan["prompt_id"])
            rows["candidate"].append(candidate)
            rows["flac"].append(flac_bytes(audio, sample_rate))
            rows["faults"].append(json.dumps(faults))
    schema = pa.schema(
        [
            ("prompt_id", pa.string()),
            ("candidate", pa.int64()),
            ("flac", pa.binary()),
            ("faults", pa.string()),
        ]
    )
    return pa.table(rows, schema=schema)


def prompt_plans(params: GenerateParams) -> list[tuple[str, list[list[tuple[str, float]]]]]:
    """Each prompt's split and its candidates' faults, drawn before any audio exists (so the
    truth, and the pairs it allows, follow from the params alone)."""
    rng = np.random.default_rng(params.seed + 1)
    splits = split_of(params, rng)
    return [(split, fault_plans(params, rng)) for split in splits]


def plan_prompts(params: GenerateParams) -> tuple[pa.Table, dict[str, bytes]]:
    """The prompts' rows (clean clip as FLAC, faults per candidate) and their reference clips."""
    plans = prompt_plans(params)
    rows, references = [], {}
    for index, clip in enumerate(source_clips(params)):
        split, faults = plans[index]
        prompt_id = f"p{index:04d}"
        reference = None
        if clip.reference is not None:
            reference = f"{AUDIO}/{prompt_id}/reference.flac"
            references[reference] = flac_bytes(clip.reference, params.sample_rate)
        description = json.dumps(clip.description.__dict__) if clip.description else ""
        rows.append(
            {
                "prompt_id": prompt_id,
                "split": split,
                "modality": clip.modality,
                "prompt": clip.prompt,
                "lyrics": clip.lyrics,
                "reference_audio": reference,
                "clean": flac_bytes(clip.audio, params.sample_rate),
                "description": description,
                "faults": json.dumps(faults),
                "seed": clip_seed(params, index),
            }
        )
    if len(rows) < params.prompts:
        raise InputError(
            f"cmipref.generate: the source gave {len(rows)} clips, "
            f"cmipref.generate.prompts is {params.prompts}; lower it"
        )
    return pa.Table.from_pylist(rows), references


def candidate_pairs(
    truth: list[dict[str, Any]], split: str, params: GenerateParams, rng: np.random.Generator
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """One prompt's pairs with a clear truth gap, in random A/B order; all on test prompts."""
    pairs = [
        (a, b)
        for a, b in itertools.combinations(truth, 2)
        if abs(a["quality"] - b["quality"]) >= params.min_quality_gap
    ]
    if split != "test" and len(pairs) > params.pairs_per_prompt:
        pairs = [
            pairs[i] for i in sorted(rng.choice(len(pairs), params.pairs_per_prompt, replace=False))
        ]
    return [(a, b) if rng.random() < 0.5 else (b, a) for a, b in pairs]


def run(params: CmiprefParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    settings = params.generate
    prompts, references = plan_prompts(settings)
    log.info(
        "cmipref.generate: %d prompts × %d candidates (%s source)",
        prompts.num_rows,
        settings.candidates,
        settings.source.kind,
    )
    rendered = map_table(
        prompts,
        render_batch,
        batch_size=settings.batch_size,
        jit_warmup=True,  # the faults call librosa's numba code
        sample_rate=settings.sample_rate,
        seconds=settings.seconds,
    )
    rendered = collect(rendered)
    info = {row["prompt_id"]: row for row in prompts.drop_columns(["clean"]).to_pylist()}
    files: dict[str, Any] = {str(Path(k).relative_to(AUDIO)): v for k, v in references.items()}
    truth_by_prompt: dict[str, list[dict[str, Any]]] = {}
    for row in rendered.to_pylist():
        path = f"{AUDIO}/{row['prompt_id']}/c{row['candidate']}.flac"
        files[str(Path(path).relative_to(AUDIO))] = row["flac"]
        faults = json.loads(row["faults"])
        musicality, alignment = penalties([tuple(f) for f in faults])
        truth_by_prompt.setdefault(row["prompt_id"], []).append(
            {
                "audio": path,
                "prompt_id": row["prompt_id"],
                "candidate": row["candidate"],
                "split": info[row["prompt_id"]]["split"],
                "faults": row["faults"],
                "musicality": musicality,
                "alignment": alignment,
                "quality": (musicality + alignment) / 2,
            }
        )
    rng = np.random.default_rng(settings.seed + 2)
    pairs = []
    for prompt_id in sorted(truth_by_prompt):
        prompt = {k: info[prompt_id][k] for k in PROMPT_COLUMNS}
        clips = sorted(truth_by_prompt[prompt_id], key=lambda r: r["candidate"])
        for a, b in candidate_pairs(clips, prompt["split"], settings, rng):
            pairs.append(
                {
                    "pair_id": f"{prompt_id}-{a['candidate']}{b['candidate']}",
                    **prompt,
                    "audio_a": a["audio"],
                    "audio_b": b["audio"],
                }
            )
    truth = [row for prompt_id in sorted(truth_by_prompt) for row in truth_by_prompt[prompt_id]]
    faults = Counter(f[0] for row in truth for f in json.loads(row["faults"]))
    summary = {
        "prompts": prompts.num_rows,
        "clips": len(truth),
        "pairs": len(pairs),
        "pairs_by_split": dict(Counter(p["split"] for p in pairs)),
        "prompts_by_split": dict(Counter(row["split"] for row in info.values())),
        "pairs_by_modality": dict(Counter(p["modality"] for p in pairs)),
        "faults": dict(sorted(faults.items())),
        "source": settings.source.kind,
    }
    log.info(
        "cmipref.generate: %d clips, %d pairs %s", len(truth), len(pairs), summary["pairs_by_split"]
    )
    return {
        "audio": Folder(files),
        "pairs": pa.Table.from_pylist(pairs),
        "truth": pa.Table.from_pylist(truth),
        "summary": summary,
    }


STAGE = Stage(
    name="cmipref.generate",
    run=run,
    params_key="cmipref",
    params=("cmipref.generate",),
    inputs={},
    outputs={
        "audio": AUDIO,
        "pairs": "data/interim/cmipref/pairs.parquet",
        "truth": "data/interim/cmipref/truth.parquet",
        "summary": Output.metrics("data/interim/cmipref/summary.json"),
    },
    uses_ray=True,
    headline="data/interim/cmipref/summary.json:pairs",
)
