"""cmipref after a real `dvc repro` (small presets): clips generated, pool pairs judged in both
orders, the reward model trained, registered and evaluated next to the judges; the audio-LLM
judge's wire format over HTTP; `paperline tune cmipref` running its grid."""

import base64
import http.server
import io
import json
import threading

import mlflow
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tasks.core.evidence import read_claims
from tests.conftest import StandIn, run_cli
from tests.integration.test_kg_model import configure_store
from tests.reproduced import copy_built

pytestmark = pytest.mark.integration
LABEL_COLUMNS = {
    "prompt",
    "lyrics",
    "reference_audio",
    "audio_a",
    "audio_b",
    "preference",
    "preference_musicality",
    "preference_alignment",
    "confidence",
    "modality",
}


def test_pool_pairs_are_pseudo_labelled_with_the_papers_columns(cmipref_reproduced):
    root, _ = cmipref_reproduced
    summary = json.loads((root / "data/interim/cmipref/summary.json").read_text())
    assert summary["clips"] == 16 * 4 and set(summary["pairs_by_split"]) == {
        "pool",
        "finetune",
        "test",
    }
    labels = pq.read_table(root / "data/processed/cmipref/pseudo_labels.parquet")
    assert set(labels.column_names) >= LABEL_COLUMNS
    rows = labels.to_pylist()
    assert rows and all(
        (root / r["audio_a"]).exists() and (root / r["audio_b"]).exists() for r in rows
    )
    assert all(r["reference_audio"] is None or (root / r["reference_audio"]).exists() for r in rows)
    assert {r["modality"] for r in rows} <= {"text", "text+lyrics", "text+ref", "all"}
    assert all(r["preference"] in (pytest.approx(0.05), pytest.approx(0.95)) for r in rows)
    truth = pq.read_table(root / "data/interim/cmipref/truth.parquet")
    assert "faults" not in labels.column_names and "faults" in truth.column_names
    metrics = json.loads((root / "data/processed/cmipref/label_metrics.json").read_text())
    assert metrics["kept_pairs"] == len(rows) <= metrics["judged_pairs"]
    assert 0 <= metrics["accuracy"]["overall"] <= 1


def test_reward_model_is_evaluated_next_to_the_judges(cmipref_reproduced):
    root, _ = cmipref_reproduced
    metrics = json.loads((root / "data/processed/cmipref/eval_metrics.json").read_text())
    overall = metrics["overall_accuracy"]
    assert set(overall) == {"reward_model", "judge"} and all(0 <= v <= 1 for v in overall.values())
    best = max(overall, key=overall.get)
    assert metrics["higher_overall"] == (best if len(set(overall.values())) == 2 else "tie")
    for scorer in ("reward_model", "judge"):
        breakdown = metrics["accuracy"][scorer]
        assert {"overall", "musicality", "alignment"} <= set(breakdown)
        assert any(name.startswith("confidence ") for name in breakdown)
        assert any(name.startswith("modality ") for name in breakdown)
    assert set(metrics["top_k"]["reward_model"]) == {"top_1", "top_2"}
    report = (root / "data/processed/cmipref/evaluation.md").read_text()
    assert "| overall |" in report and "Higher overall" in report


def test_claims_are_measured_on_prompts_that_never_trained_or_tuned_the_model(cmipref_reproduced):
    root, _ = cmipref_reproduced
    pairs = pq.read_table(root / "data/interim/cmipref/pairs.parquet").to_pylist()
    tested = {p["prompt_id"] for p in pairs if p["split"] == "test"}
    finetune = [p for p in pairs if p["split"] == "finetune"]  # fine-tune and dev prompts
    labels = pq.read_table(root / "data/processed/cmipref/pseudo_labels.parquet").to_pylist()
    trained = {p["prompt_id"] for p in finetune} | {r["prompt_id"] for r in labels}
    assert tested and not tested & trained
    training = json.loads((root / "models/cmi_rm/metrics.json").read_text())
    assert training["finetune_pairs"] + training["dev_pairs"] == len(finetune)
    assert training["pseudo_pairs"] == len(labels)
    metrics = json.loads((root / "data/processed/cmipref/eval_metrics.json").read_text())
    assert metrics["held_out"] == {
        "test_prompts": len(tested),
        "training_prompts": len(trained),
        "shared": 0,
    }
    claims = read_claims(root / "data/processed/cmipref/claims.json")
    ids = {claim.id for claim in claims}
    assert {"cmipref.rm_beats_judge", "cmipref.top_1_gain", "cmipref.top_2_gain"} <= ids
    assert metrics["verdicts"] == {claim.id: claim.verdict for claim in claims}
    for claim in claims:
        assert claim.unit == "prompts" and 2 <= claim.n <= len(tested)
        inside = claim.ci_low <= claim.null <= claim.ci_high
        ruled = claim.reason is not None  # a rule (one seed, p, degenerate) decided
        assert (claim.verdict == "inconclusive") == (inside or ruled)
    distilled = next(c for c in claims if c.id == "cmipref.rm_beats_judge")
    assert distilled.arms == ["CMI reward model", "signal judge (pseudo-labeller)"]
    assert distilled.p_value is not None
    row = metrics["versus_judge"]["judge"]["overall"]
    assert row["difference"] == pytest.approx(distilled.estimate, abs=1e-4)
    report = (root / "data/processed/cmipref/evaluation.md").read_text()
    assert "## Claims" in report and "cmipref.rm_beats_judge" in report
    configure_store(root)
    experiment = mlflow.get_experiment_by_name("paperline-cmi-rm")
    run = mlflow.search_runs(
        [experiment.experiment_id],
        filter_string="attributes.run_name = 'cmi-rm-evaluate'",
        output_format="list",
    )[0]
    logged = {a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id)}
    assert "claims.json" in logged


def test_reward_model_is_registered_with_its_card_and_loads_from_the_registry(cmipref_reproduced):
    root, _ = cmipref_reproduced
    configure_store(root)
    client = mlflow.MlflowClient()
    version = client.get_model_version_by_alias("paperline-cmi-rm", "candidate")
    assert version.description.startswith("# paperline-cmi-rm\n")
    assert "Bradley-Terry" in version.description and version.tags["git_commit"]
    assert "dvc.lock:data/processed/cmipref/pseudo_labels.parquet" in version.tags
    registered = mlflow.pyfunc.load_model("models:/paperline-cmi-rm@candidate")
    clip = next((root / "data/interim/cmipref/audio").rglob("*.flac"))
    rewards = registered.predict(
        pd.DataFrame({"prompt": ["a calm piano piece"], "audio": [str(clip)]})
    )
    assert list(rewards.columns) == ["alignment", "musicality", "reward"]
    assert np.isfinite(rewards.to_numpy()).all()
    metrics = json.loads((root / "models/cmi_rm/metrics.json").read_text())
    assert metrics["pretrain_steps"] == 20 and metrics["finetune_steps"] == 10
    assert "dev_accuracy_overall" in metrics


class AudioJudgeServer(StandIn):
    """An OpenAI-compatible audio judge stand-in: decodes the two `input_audio` WAVs it is
    sent and prefers the one with the lower spectral flatness (the less noisy)."""

    requests: list = []

    def do_POST(self):
        import soundfile

        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(request)
        parts = request["messages"][-1]["content"]
        clips = [
            soundfile.read(io.BytesIO(base64.b64decode(p["input_audio"]["data"])))[0]
            for p in parts
            if p["type"] == "input_audio"
        ]

        def flatness(audio):
            spectrum = np.abs(np.fft.rfft(audio)) + 1e-9
            return np.exp(np.mean(np.log(spectrum))) / np.mean(spectrum)

        first = "A" if flatness(clips[0]) < flatness(clips[1]) else "B"
        verdict = {"musicality": first, "alignment": first, "confidence": 4}
        self.reply_chat(request["model"], f"```json\n{json.dumps(verdict)}\n```")


def test_audio_llm_judge_hears_both_clips_in_the_order_given(tmp_path, monkeypatch):
    import soundfile

    from tasks.cmipref.degrade import degrade
    from tasks.cmipref.judges import Listening, make_judge
    from tasks.cmipref.music import MusicDescription, describe, synthesize
    from tasks.cmipref.params import JudgeParams

    tune = MusicDescription(
        tempo=100, key=0, mode="major", lead="flute", harmony="piano", density="sparse"
    )
    clean = synthesize(tune, 5.0, 16000, seed=0)
    soundfile.write(tmp_path / "clean.flac", clean, 16000)
    soundfile.write(tmp_path / "noisy.flac", degrade(clean, 16000, [("noise", 1.0)], 0), 16000)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), AudioJudgeServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    AudioJudgeServer.requests = []
    monkeypatch.setenv("CMIPREF_TEST_KEY", "local")
    try:
        judge = make_judge(
            JudgeParams(
                backend="openai",
                model="omni",
                base_url=f"http://127.0.0.1:{server.server_port}/v1",
                api_key_env="CMIPREF_TEST_KEY",
            ),
            16000,
        )
        asked = {"pair_id": "p", "prompt": describe(tune), "lyrics": "la la", "reference": None}
        clean_file, noisy_file = tmp_path / "clean.flac", tmp_path / "noisy.flac"
        forward = judge.compare(
            Listening(**asked, first=clean_file, second=noisy_file, swapped=False)
        )
        backward = judge.compare(
            Listening(**asked, first=noisy_file, second=clean_file, swapped=True)
        )
    finally:
        server.shutdown()
    assert forward.musicality == pytest.approx(0.8) and backward.musicality == pytest.approx(-0.8)
    assert judge.name == "openai:omni" and len(AudioJudgeServer.requests) == 2
    text = AudioJudgeServer.requests[0]["messages"][-1]["content"][0]["text"]
    assert describe(tune) in text and "la la" in text


def test_tune_cmipref_runs_its_grid_and_logs_each_trial(cmipref_reproduced, tmp_path):
    source, _ = cmipref_reproduced
    root = tmp_path / "repo"
    copy_built(source, root)
    result = run_cli("tune", "cmipref", cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("learning_rate=")]
    assert len(rows) == 2 and all("dev_accuracy_overall=" in row for row in rows)
    configure_store(root)
    experiment = mlflow.get_experiment_by_name("paperline-cmi-rm-tune")
    runs = mlflow.search_runs([experiment.experiment_id], output_format="list")
    assert len(runs) == 3  # the grid's parent run and one run per trial


def test_a_corrupt_jit_cache_fails_the_label_stage_fast_and_doctor_recovers(
    cmipref_reproduced, tmp_path
):
    """librosa's numba functions load from the project's cache folder; garbage there ends
    cmipref.label within a minute with one line naming the cache, `paperline doctor
    --clear-jit-cache` clears it, and the rerun labels exactly as before."""
    import time

    repo_copy = copy_built(cmipref_reproduced.root, tmp_path / "repo")  # clips generated
    cache = repo_copy / ".paperline" / "numba-cache"
    labels = repo_copy / "data/processed/cmipref/pseudo_labels.parquet"
    project_cache = {"NUMBA_CACHE_DIR": None}  # not the test process's own cache folder
    done = run_cli("stage", "cmipref.label", cwd=repo_copy, env=project_cache)  # fills it
    assert done.returncode == 0, done.stderr[-3000:]
    clean = labels.read_bytes()
    compiled = list(cache.rglob("*.nbc"))
    assert compiled, "librosa's compiled functions should be cached in .paperline/numba-cache"
    for path in compiled:
        path.write_bytes(b"\x80\x05garbage, not a pickle")
    started = time.monotonic()
    done = run_cli("stage", "cmipref.label", cwd=repo_copy, env=project_cache)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        assert elapsed < 60, elapsed
        line = done.stderr.splitlines()[0]
        assert line.startswith("cmipref.label: judge_batch "), line
        assert "paperline doctor --clear-jit-cache" in line and str(cache) in line, line
    cleared = run_cli("doctor", "--clear-jit-cache", cwd=repo_copy, env=project_cache)
    assert cleared.returncode == 0 and not cache.exists(), cleared.stderr
    done = run_cli("stage", "cmipref.label", cwd=repo_copy, env=project_cache)
    assert done.returncode == 0, done.stderr[-3000:]
    assert labels.read_bytes() == clean
