"""The evaluation's parts: the leaderboard, MTEB result files, TREC runs, model folders."""

import json

from tasks.aoeb.benchmark import RetrievalTask, TaskDeclaration
from tasks.aoeb.evaluate import leaderboard, leaderboard_csv, leaderboard_table, with_tokenizer
from tasks.aoeb.params import AoebParams
from tasks.aoeb.trec import read_run, run_text


def task(name, capability, modality="text"):
    return RetrievalTask(TaskDeclaration(name, capability, modality=modality), {}, {}, {})


TASKS = [task("Code", "code"), task("Tool", "tool"), task("Pics", "multimodal", "text-to-image")]


def test_leaderboard_compares_the_finetune_with_its_base_on_the_text_tasks_both_ran():
    results = {
        "mmbert": {"Code": 0.2, "Tool": 0.4},
        "embedder": {"Code": 0.5, "Tool": 0.5, "Pics": 0.1},
    }
    skipped = {"mmbert": {"Pics": "no image tower"}}
    board = leaderboard(results, skipped, TASKS, AoebParams())
    embedder = board["encoders"]["embedder"]
    assert (
        embedder["mean"] == round((0.5 + 0.5 + 0.1) / 3, 4) and embedder["mean_text_tasks"] == 0.5
    )
    assert board["encoders"]["mmbert"]["skipped"] == {"Pics": "no image tower"}
    assert board["finetuned_vs_base"]["gain"] == 0.2
    table = leaderboard_table(board, TASKS)
    assert "| mmbert | 0.2000 | 0.4000 | — | 0.3000 | 0.3000 |" in table
    assert "- mmbert skipped Pics: no image tower" in table
    assert "multimodal · embedder,0.1" in leaderboard_csv(board)


def test_a_run_file_round_trips_exactly(tmp_path):
    run = {"q2": {"b": 0.1 + 0.2, "a": 0.3}, "q1": {"x": -1.5}}
    text = run_text(run, "enc")
    assert text.splitlines()[0] == "q1 Q0 x 1 -1.5 enc"
    path = tmp_path / "run.trec"
    path.write_text(text)
    assert read_run(path) == run


def test_a_checkpoint_without_its_tokenizer_is_joined_with_it(tmp_path):
    model, tokenizer, tower = tmp_path / "model", tmp_path / "tokenizer", tmp_path / "tower"
    for folder in (model, tokenizer, tower):
        folder.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "modernbert"}))
    (tokenizer / "tokenizer.json").write_text("{}")
    (tokenizer / "README.md").write_text("card")
    (tower / "config.json").write_text(json.dumps({"embed_dim": 8}))
    joined = with_tokenizer(model, tokenizer, tmp_path / "scratch")
    assert sorted(p.name for p in joined.iterdir()) == ["config.json", "tokenizer.json"]
    assert with_tokenizer(joined, tokenizer, tmp_path / "scratch") == joined
    assert with_tokenizer(tower, tokenizer, tmp_path / "scratch") == tower  # not a transformer
