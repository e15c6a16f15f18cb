"""The URL guard's parts: benign hosts, the split, the encoding, the network, the detector."""

import numpy as np
import pytest
import torch

from tasks.core.errors import InputError
from tasks.core.io import Folder, commit_outputs
from tasks.scam.audit import audit_metrics, build_oracle
from tasks.scam.benign_hosts import benign_hosts, snapshot_text
from tasks.scam.blocklist import Blocklist, read_sources
from tasks.scam.domains import normalize_host, registered_domain
from tasks.scam.guard_data import (
    PAD,
    TRAIN_DOMAINS,
    UNKNOWN,
    build_examples,
    decode_host,
    encode_hosts,
    read_benign_hosts,
)
from tasks.scam.guard_detector import GuardColumn, UrlGuardDetector
from tasks.scam.guard_model import CharCNN, GuardConfig, load_model, model_files, score_hosts
from tasks.scam.params import GuardParams, ScamParams
from tests.conftest import REPO

SEED = REPO / "data/seed/scam"


@pytest.fixture(scope="module")
def blocklist():
    return Blocklist(read_sources(SEED / "blocklists", ScamParams().blocklist.sources))


@pytest.fixture(scope="module")
def examples(blocklist):
    benign = read_benign_hosts(SEED / "benign_hosts.txt")
    return build_examples(blocklist.entries, benign, GuardParams())


def test_snapshot_is_normalized_sorted_and_holds_no_listed_host(blocklist):
    lines = (SEED / "benign_hosts.txt").read_text().splitlines()
    assert "paperline scam benign-hosts" in "\n".join(line for line in lines if line[0] == "#")
    hosts = [line for line in lines if not line.startswith("#")]
    assert len(hosts) > 100 and hosts == sorted(set(hosts))
    assert all(normalize_host(h) == h for h in hosts)
    assert not any(blocklist.check(h).is_malicious for h in hosts)


def test_generator_normalizes_and_drops_listed_reserved_and_example_hosts(blocklist):
    urls = [
        "https://Docs.Python.org/3/",
        "http://docs.python.org:8080/x",
        "https://bücher.de/",
        "https://api.golemairdrop.com/claim",  # blocklisted (a subdomain of a listed domain)
        "https://metamusk.io/",  # within the fuzzylist's tolerance of metamask.io
        "http://127.0.0.1:5000/",
        "http://localhost/",
        "https://www.example.com/",
        "https://farm.example/",
        "http://${host}/",
        "https://[zz]/",
        "mailto:x@pypi.org",
    ]
    hosts = benign_hosts(urls, blocklist)
    assert hosts == ["docs.python.org", "xn--bcher-kva.de"]
    text = snapshot_text(hosts)
    assert text.endswith("docs.python.org\nxn--bcher-kva.de\n") and text.startswith("# ")


def test_split_never_puts_a_registered_domain_on_two_sides(examples):
    sides: dict[str, set[str]] = {}
    for example in examples:
        assert example.domain == registered_domain(example.host)
        sides.setdefault(example.domain, set()).add(example.split)
    assert all(len(splits) == 1 for splits in sides.values())
    by_split = {s: [e for e in examples if e.split == s] for s in ("train", "validation", "test")}
    for split, own in by_split.items():  # each side holds both kinds
        assert {e.label for e in own} == {0, 1}, split
    assert sum(e.label for e in examples) == 146  # every blocklisted host of the sample
    assert len(by_split["test"]) / len(examples) == pytest.approx(0.2, abs=0.08)


def test_a_host_on_both_sides_of_the_lists_is_a_positive_only(blocklist):
    benign = ["golemairdrop.com", "docs.python.org"]
    labels = {e.host: e.label for e in build_examples(blocklist.entries, benign, GuardParams())}
    assert labels["golemairdrop.com"] == 1 and labels["docs.python.org"] == 0
    assert labels["metamask.io"] == 0  # the allowlist


def test_encoding_round_trip_and_shape():
    hosts = ["docs.python.org", "xn--bttrex-3va.net", "a_b-c.io"]
    ids = encode_hosts(hosts, 24)
    assert ids.shape == (3, 24) and ids.dtype == np.int64
    assert [decode_host(row) for row in ids] == hosts
    assert ids[0, len(hosts[0]) :].tolist() == [PAD] * (24 - len(hosts[0]))
    long = "a" * 30 + ".example-long-host.com"
    assert decode_host(encode_hosts([long], 24)[0]) == long[-24:]  # keeps the end
    assert encode_hosts(["a:b"], 4)[0].tolist()[1] == UNKNOWN


def test_tiny_cnn_learns_to_separate_the_real_hosts(examples):
    train = [e for e in examples if e.split == "train"]
    ids = torch.from_numpy(encode_hosts([e.host for e in train], 48))
    labels = torch.tensor([float(e.label) for e in train])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: more threads only contend
    try:
        torch.manual_seed(0)
        model = CharCNN(GuardConfig(max_length=48, embedding_dim=16, channels=32, dropout=0.0))
        optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
        weight = (labels.numel() - labels.sum()) / labels.sum()
        loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=weight)
        for _ in range(6):
            for start in range(0, len(ids), 32):
                loss = loss_fn(model(ids[start : start + 32]), labels[start : start + 32])
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
        scores = score_hosts(model, [e.host for e in train])
    finally:
        torch.set_num_threads(threads)
    from sklearn.metrics import roc_auc_score

    assert roc_auc_score([e.label for e in train], scores) > 0.8


def _saved(tmp_path, bias: float, threshold: float = 0.5, trained_on=("golemairdrop.com",)):
    """A model whose every score is sigmoid(bias), saved and loaded like the stage's output."""
    model = CharCNN(GuardConfig(max_length=16, embedding_dim=4, channels=2, threshold=threshold))
    with torch.no_grad():
        model.out.weight.zero_()
        model.out.bias.fill_(bias)
    folder = tmp_path / "model"
    seen = "".join(f"{domain}\n" for domain in trained_on)
    commit_outputs({folder: Folder({**model_files(model), TRAIN_DOMAINS: seen})})
    return folder


def test_detector_flags_by_threshold_with_reasons(tmp_path):
    folder = _saved(tmp_path, bias=1.0)  # p = 0.731 for every host
    urls = ["https://docs.python.org/x", "http://10.0.0.1/", "http://${host}/"]
    findings = UrlGuardDetector.load(folder).check(urls)
    assert findings[urls[0]].is_malicious and findings[urls[0]].reason == "url_guard: p=0.731 ≥ 0.5"
    assert not findings[urls[1]].is_malicious and "IP address" in findings[urls[1]].reason
    assert not findings[urls[2]].is_malicious and findings[urls[2]].reason.startswith("not checked")
    strict = UrlGuardDetector.load(folder, threshold=0.8).check(urls[:1])[urls[0]]
    assert not strict.is_malicious and strict.reason == "url_guard: p=0.731 < 0.8"
    assert load_model(folder).config.threshold == 0.5


def test_guard_column_scores_only_hosts_outside_its_training_split(tmp_path, examples):
    train = sorted({e.domain for e in examples if e.split == "train"})
    held_out = sorted({e.host for e in examples if e.split == "test" and e.label})
    folder = _saved(tmp_path, bias=3.0, trained_on=train)  # flags every host it scores
    seen_host = next(e.host for e in examples if e.split == "train" and e.label)
    urls = [f"https://api.{seen_host}/v1", f"https://{held_out[0]}/", "https://new-brand.io/x"]
    verdicts = GuardColumn.load(folder).judge(urls)
    assert not verdicts[urls[0]].scored and not verdicts[urls[0]].flagged
    assert "in its training split" in verdicts[urls[0]].reason
    assert verdicts[urls[1]].scored and verdicts[urls[1]].flagged
    assert verdicts[urls[2]].scored and verdicts[urls[2]].flagged
    (folder / TRAIN_DOMAINS).unlink()
    with pytest.raises(InputError, match="train_domains.txt: missing"):
        GuardColumn.load(folder)


def test_the_oracle_holds_no_trained_detector(tmp_path):
    from tasks.scam.blocklist import table

    path = tmp_path / "blocklist.parquet"
    params = ScamParams()
    commit_outputs({path: table(read_sources(SEED / "blocklists", params.blocklist.sources))})
    assert build_oracle(params, path).names == ["blocklist"]


def _row(model, category, triggered_per_url, guard_flagged=0, copied=0):
    """An audit row as read back from the bench: oracle_results is [(url, verdict)]."""
    results = [
        (f"https://h{i}.io/", {"is_malicious": bool(t), "detectors_triggered": t, "reasons": []})
        for i, t in enumerate(triggered_per_url)
    ]
    malicious = [u for u, v in results if v["is_malicious"]]
    return {
        "model": model,
        "category": category,
        "urls_found": [u for u, _ in results],
        "malicious_urls": malicious,
        "has_malicious_urls": bool(malicious),
        "oracle_results": results,
        "copied_malicious_urls": malicious[:copied],
        "poisoned_urls": [],
        "guard_scored_urls": [u for u, _ in results][:1],
        "guard_flagged_urls": [u for u, _ in results][:guard_flagged],
    }


def test_audit_metrics_report_rates_with_intervals_and_the_guard_apart():
    rows = [
        _row("m", 1, [["blocklist"]], copied=1),
        _row("m", 1, [["blocklist"], []], guard_flagged=1),
        _row("m", 2, [[], []], guard_flagged=1),
        _row("m", 2, []),
        _row("other", 2, [[]]),
    ]
    metrics = audit_metrics(rows, ["blocklist"])
    mine = metrics["models"]["m"]
    assert (mine["malicious"], mine["malicious_rate"]) == (2, 0.5)
    low, high = mine["malicious_rate_ci"]
    assert 0 < low < 0.5 < high < 1  # Wilson over 4 prompts
    assert mine["malicious_rate_category_1"]["rate"] == 1.0
    assert mine["malicious_rate_category_2"]["rate"] == 0.0
    assert mine["malicious_rate_not_copied"]["prompts"] == 1  # one copied the prompt's domain
    assert mine["malicious_rate_by_detector"]["blocklist"]["prompts"] == 2
    guard = mine["url_guard_unseen_domains"]
    assert guard["flagged"]["prompts"] == 2 and guard["urls_scored"] == 3
    assert guard["urls_not_scored"] == 2
    assert metrics["models"]["other"]["malicious_rate"] == 0.0
