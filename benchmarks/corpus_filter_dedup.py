"""Throughput of paperline's corpus filter + dedup against datatrove on the same documents.

Run: `.venv/bin/python benchmarks/corpus_filter_dedup.py --mb 50` (`--repeats 3` for medians;
`--two-node` adds a run on a two-node local Ray cluster; `--profile` profiles instead).

Input. The UDHR seed corpus (11.4k documents, 4.9 MB of UTF-8 text) is replicated up to
`--mb` megabytes of text: `max(2, ceil(mb / 4.9))` copies of one seeded sample of its
documents, so that even small runs have cross-replica near-duplicates. Replica k gets ids
`<id>#k`; replica 0 is the original text, and in each later replica every document loses
one space-separated word (one character where there are no spaces), chosen by a seeded RNG.
That is how crawled near-duplicates look (the same page with a small edit), and it leaves the
outcome to the dedup: a long document's copies keep a 3-gram Jaccard well above 0.8 and
collapse, while a short one's fall below and survive. Appending a token would make nearly
every copy a duplicate; leaving the copies unchanged would only test the exact-hash path.

What is timed, for both systems: from reading the same Parquet shards (one per datatrove
task) to the kept documents written as Parquet.
- paperline: `filter_documents` then `deduplicate` (exact hash + MinHash LSH with
  verification), both with `num_workers` Ray workers (2, then 1), on a local Ray with 2 CPUs.
  `ray.init` and a warm-up call on 4,097 documents (three tasks, so both workers start and
  load their character tables and compiled code) are outside the timing. `num_workers`
  bounds the map steps and the number of the dedup's shuffle partitions (reduce tasks).
- datatrove: four LocalPipelineExecutor runs, each with workers=2 (a multiprocess pool,
  whose start is inside the timing): read → GopherQualityFilter → GopherRepetitionFilter →
  write filtered → MinhashDedupSignature (tasks=2); MinhashDedupBuckets (tasks=9, one per
  bucket, as the step requires); MinhashDedupCluster (tasks=1, as required); read filtered →
  MinhashDedupFilter → write kept (tasks=2).

Equivalent settings. Gopher thresholds are paperline's FilterParams defaults (min/max words,
mean word length 1–20, symbol/word ratio 0.1, duplicate line fraction 0.3); the Gopher checks
paperline has no counterpart for are off (bullet and ellipsis lines, alphabetic words, English
stop words, duplicate paragraphs, duplicate line/paragraph characters, top and duplicated word
n-grams). paperline's language-code, script and character 10-gram repetition checks have no
datatrove counterpart, so datatrove does less filtering work (this favours datatrove; with its
word n-gram checks on it would drop a third of these short, formulaic UDHR articles).
MinHash: 9 buckets × 13 hashes (paperline's `DedupParams().banding()` for 128 permutations at
threshold 0.8), word 3-grams, 32-bit xxhash shingles as in paperline. datatrove keeps its
default text simplification before shingling, has no separate exact-hash pass (exact copies
share every bucket anyway) and, unlike paperline, does not verify candidate pairs. datatrove
passes str to xxhash, which the installed xxhash 4 rejects, so its signature step hashes
UTF-8 bytes instead.

Outputs. Every paperline run records the SHA-256 of its kept-documents Parquet file; the
report says whether they are identical across worker counts and cluster shapes.

Two nodes (`--two-node`). After the single-node runs the driver leaves its Ray and starts a
cluster of two nodes on this machine, one CPU each: a head (`tasks.core.ray_cluster.LocalRay`,
token authentication with a token of its own, address and token settings in RAY_ADDRESS /
RAY_AUTH_MODE / RAY_AUTH_TOKEN_PATH) and a second `ray start --address` node that joins it
with the same token settings; the driver joins through RAY_ADDRESS. paperline runs there with
2 workers, and Ray's task events (from the GCS; `ray.util.state` needs the dashboard, which
is not installed) give the tasks each node ran and their running time. Both `ray start`
processes are stopped by pid at the end (never `ray stop`).

Profile (`--profile`). paperline's per-batch functions and the dedup's driver steps, run one
after another in this process under cProfile in CPU time (in the timed runs they run in Ray
workers, out of a driver profile's sight); prints the top of the profile by own time.

Word tokenizer. datatrove's tokenizers for these languages need spaCy or NLTK, neither
installed (nor their data offline), so both Gopher filters and the MinHash step get
`PaperlineWordTokenizer`: paperline's word pattern, and one word per letter in scripts
written without spaces, decided letter by letter (a datatrove tokenizer does not see the
document's declared script, which paperline uses).
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import math
import multiprocessing
import os
import pstats
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import regex
import xxhash
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupFilter,
    MinhashDedupSignature,
)
from datatrove.pipeline.filters import GopherQualityFilter, GopherRepetitionFilter
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.writers import ParquetWriter
from datatrove.utils.hashing import HashConfig
from datatrove.utils.word_tokenizers import WordTokenizer

from tasks.core.params import RayParams
from tasks.core.ray_cluster import HEAD_ENV, LocalRay
from tasks.core.ray_runtime import init_ray
from tasks.corpus.dedup import (
    clusters,
    deduplicate,
    first_of_each_text,
    pairs_in_partition,
    partition_buckets,
    signature_batch,
    similar,
)
from tasks.corpus.documents import documents_table
from tasks.corpus.filter import filter_batch, filter_documents
from tasks.corpus.params import DedupParams, FilterParams
from tasks.corpus.udhr import read_udhr

ROOT = Path(__file__).resolve().parents[1]
DATATROVE_TASKS = 2
# more rows than two Ray tasks take: both workers start and load their character tables and
# compiled code before the timing
WARM_UP_ROWS = 2 * FilterParams().batch_size + 1
SEED = 1

# --- input ---------------------------------------------------------------------------------


def text_bytes(table: pa.Table) -> int:
    return pc.sum(pc.binary_length(table.column("text"))).as_py() or 0


def drop_one_word(text: str, rng: random.Random) -> str:
    words = text.split(" ")
    if len(words) > 1:
        del words[rng.randrange(len(words))]
        return " ".join(words)
    cut = rng.randrange(len(text))
    return text[:cut] + text[cut + 1 :]


def sample_documents(table: pa.Table, target_bytes: int) -> pa.Table:
    """A seeded sample of rows (in their original order) with about `target_bytes` of text."""
    order = list(range(table.num_rows))
    random.Random(SEED).shuffle(order)
    sizes = pc.binary_length(table.column("text")).to_pylist()
    chosen, total = [], 0
    for row in order:
        if total >= target_bytes:
            break
        chosen.append(row)
        total += sizes[row]
    return table.take(sorted(chosen))


def replica(table: pa.Table, k: int) -> pa.Table:
    """Copy k of the documents: unique ids, and from k = 1 on one word fewer per document."""
    ids = [f"{doc_id}#{k}" for doc_id in table.column("id").to_pylist()]
    texts = table.column("text").to_pylist()
    if k > 0:
        rng = random.Random(f"{SEED}/{k}")
        texts = [drop_one_word(text, rng) for text in texts]
    columns = {
        "id": pa.array(ids, pa.string()),
        "text": pa.array(texts, pa.string()),
        "n_chars": pa.array([len(t) for t in texts], pa.int64()),
    }
    for name, values in columns.items():
        table = table.set_column(table.schema.get_field_index(name), name, values)
    return table


def replicated_corpus(target_mb: float) -> pa.Table:
    udhr = documents_table(read_udhr(ROOT / "data" / "seed" / "udhr"))
    target_bytes = int(target_mb * 1e6)
    copies = max(2, math.ceil(target_bytes / text_bytes(udhr)))
    base = sample_documents(udhr, target_bytes // copies)
    return pa.concat_tables(replica(base, k) for k in range(copies))


def write_shards(table: pa.Table, folder: Path, shards: int) -> None:
    folder.mkdir(parents=True)
    size = -(-table.num_rows // shards)
    for shard in range(shards):
        pq.write_table(table.slice(shard * size, size), folder / f"{shard:05d}.parquet")


# --- paperline -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    seconds: float
    after_filter: int
    after_dedup: int
    digest: str | None = None  # SHA-256 of the kept documents' Parquet file (paperline)


def paperline_filter_dedup(docs: pa.Table, workers: int) -> tuple[pa.Table, pa.Table]:
    """(documents kept by the filter, documents kept by the filter and the dedup)."""
    filtered, _ = filter_documents(docs, FilterParams(num_workers=workers))
    kept, _, _ = deduplicate(filtered, DedupParams(num_workers=workers))
    return filtered, kept


def run_paperline(shards: Path, work: Path, workers: int) -> Outcome:
    started = time.perf_counter()
    filtered, kept = paperline_filter_dedup(pq.read_table(shards), workers)
    pq.write_table(kept, work / "kept.parquet")
    seconds = time.perf_counter() - started
    digest = hashlib.sha256((work / "kept.parquet").read_bytes()).hexdigest()
    return Outcome(seconds, filtered.num_rows, kept.num_rows, digest)


def profile_paperline(corpus: pa.Table, top: int) -> None:
    """cProfile of the batch functions and the dedup's driver steps, in this process."""
    filter_params, dedup_params = FilterParams(), DedupParams()
    bands, rows = dedup_params.banding()

    def blocks(table: pa.Table, size: int) -> list[pa.Table]:
        return [table.slice(start, size) for start in range(0, table.num_rows, size)]

    def filter_and_dedup(docs: pa.Table) -> None:
        verdicts = pa.concat_tables(
            filter_batch(block, filter_params) for block in blocks(docs, filter_params.batch_size)
        )
        kept = verdicts.filter(pc.is_null(verdicts.column("reason"))).sort_by("id")
        indexed = kept.select(["text", "script"]).append_column(
            "doc", pa.array(np.arange(kept.num_rows))
        )
        signatures = [
            signature_batch(block, dedup_params, bands, rows)
            for block in blocks(indexed, dedup_params.batch_size)
        ]
        parts = [partition_buckets(block, 2) for block in signatures]
        pairs = [pairs_in_partition(*[p[i] for p in parts]) for i in range(2)]
        table = pa.concat_tables(signatures)
        unique = first_of_each_text(table.column("text_hash")) == np.arange(kept.num_rows)
        found = np.unique(
            np.stack(
                [
                    np.concatenate([t.column(c).to_numpy() for t in pairs])
                    for c in ("left", "right")
                ],
                axis=1,
            ),
            axis=0,
        )
        found = found[unique[found[:, 0]] & unique[found[:, 1]]]
        sigs = table.column("signature").combine_chunks().flatten().to_numpy()
        found = found[similar(sigs.reshape(-1, dedup_params.num_perm), found, 0.8)]
        clusters(kept.num_rows, found)

    filter_and_dedup(corpus.slice(0, 200))  # warm-up: character tables, compiled code
    profiler = cProfile.Profile(time.process_time)  # CPU time: robust to a loaded machine
    profiler.runcall(filter_and_dedup, corpus)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


# --- datatrove -----------------------------------------------------------------------------

_UNSPACED = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}\p{Yi}"
_WORD_CHAR = rf"[\p{{L}}\p{{M}}\p{{N}}--[{_UNSPACED}]]"
_WORD = regex.compile(
    rf"[\p{{L}}&&[{_UNSPACED}]]|{_WORD_CHAR}(?:{_WORD_CHAR}|['’\-])*", flags=regex.V1
)


class PaperlineWordTokenizer(WordTokenizer):
    """paperline's words (`text_stats.words`), deciding spaced or not by each letter's script."""

    def word_tokenize(self, text: str) -> list[str]:
        return _WORD.findall(text)

    def sent_tokenize(self, text: str) -> list[str]:
        return [line for line in text.split("\n") if line.strip()]

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [match.span() for match in regex.finditer(r"[^\n]+", text)]


class Utf8MinhashDedupSignature(MinhashDedupSignature):
    """datatrove hands xxhash a str, which xxhash 4 (installed here) rejects: hash UTF-8 bytes."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._hash_func = xxhash32_utf8


def xxhash32_utf8(text: str) -> int:
    return xxhash.xxh32_intdigest(text.encode("utf-8"))


def gopher_filters(tokenizer: WordTokenizer) -> list:
    params = FilterParams()
    quality = GopherQualityFilter(
        min_doc_words=params.min_words,
        max_doc_words=params.max_words,
        min_avg_word_length=params.min_mean_word_length,
        max_avg_word_length=params.max_mean_word_length,
        max_symbol_word_ratio=params.max_symbol_word_ratio,
        max_bullet_lines_ratio=None,
        max_ellipsis_lines_ratio=None,
        max_non_alpha_words_ratio=None,
        min_stop_words=None,
        language=tokenizer,
    )
    repetition = GopherRepetitionFilter(
        dup_line_frac=params.max_duplicate_line_fraction,
        dup_para_frac=None,
        dup_line_char_frac=None,
        dup_para_char_frac=None,
        top_n_grams=(),
        dup_n_grams=(),
        language=tokenizer,
    )
    return [quality, repetition]


def minhash_config() -> MinhashConfig:
    params = DedupParams()
    bands, rows = params.banding()
    return MinhashConfig(
        n_grams=params.shingle_size,
        num_buckets=bands,
        hashes_per_bucket=rows,
        seed=params.seed,
        hash_config=HashConfig(precision=32, hash_fc="xxhash"),
    )


def datatrove_executors(shards: Path, work: Path) -> list[LocalPipelineExecutor]:
    tokenizer = PaperlineWordTokenizer()
    config = minhash_config()
    filtered, signatures, buckets, removals = (
        work / name for name in ("filtered", "signatures", "buckets", "remove")
    )

    def executor(name: str, pipeline: list, tasks: int) -> LocalPipelineExecutor:
        workers = min(tasks, DATATROVE_TASKS)
        return LocalPipelineExecutor(
            pipeline, tasks=tasks, workers=workers, logging_dir=str(work / "logs" / name)
        )

    return [
        executor(
            "signatures",
            [
                ParquetReader(str(shards)),
                *gopher_filters(tokenizer),
                ParquetWriter(str(filtered)),
                Utf8MinhashDedupSignature(str(signatures), config=config, language=tokenizer),
            ],
            tasks=DATATROVE_TASKS,
        ),
        executor(
            "buckets",
            [MinhashDedupBuckets(str(signatures), str(buckets), config=config)],
            tasks=config.num_buckets,
        ),
        executor("cluster", [MinhashDedupCluster(str(buckets), str(removals), config=config)], 1),
        executor(
            "filter",
            [
                ParquetReader(str(filtered)),
                MinhashDedupFilter(str(removals)),
                ParquetWriter(str(work / "kept")),
            ],
            tasks=DATATROVE_TASKS,
        ),
    ]


@contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """This process's and its children's stderr into `path` (Ray Data and datatrove log a lot)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with path.open("wb") as log:
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def parquet_rows(folder: Path) -> int:
    return sum(pq.read_metadata(f).num_rows for f in folder.glob("*.parquet"))


def run_datatrove(shards: Path, work: Path) -> Outcome:
    executors = datatrove_executors(shards, work)
    started = time.perf_counter()
    for executor in executors:
        executor.run()
    seconds = time.perf_counter() - started
    return Outcome(seconds, parquet_rows(work / "filtered"), parquet_rows(work / "kept"))


# --- two local nodes -------------------------------------------------------------------------


class TwoNodeRay:
    """A head with one CPU (LocalRay: token auth, RAY_ADDRESS and token settings exported)
    and a second node on this machine joined to it with one CPU; both stopped by pid."""

    def __init__(self, scratch: Path) -> None:
        self.head = LocalRay(ROOT, RayParams(num_cpus=1))
        self.temp_dir = Path(tempfile.mkdtemp(prefix="pl-ray-node-", dir="/tmp"))
        self.log_path = scratch / "second-node.log"
        self.node: subprocess.Popen | None = None

    def __enter__(self) -> TwoNodeRay:
        self.head.start()
        command = [
            str(Path(sys.executable).parent / "ray"),
            "start",
            f"--address={self.head.env['RAY_ADDRESS']}",
            "--block",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=1",
            "--disable-usage-stats",
            f"--temp-dir={self.temp_dir}",
        ]
        with self.log_path.open("w") as log:
            self.node = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.head.env, **HEAD_ENV},
            )
        deadline = time.monotonic() + 120
        while "Ray runtime started." not in self.log_path.read_text(errors="replace"):
            if self.node.poll() is not None or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise RuntimeError(f"the second node did not start; see {self.log_path}")
            time.sleep(0.2)
        return self

    def __exit__(self, *_: object) -> None:
        if self.node is not None and self.node.poll() is None:
            self.node.send_signal(signal.SIGTERM)
            try:
                self.node.wait(30)
            except subprocess.TimeoutExpired:
                self.node.kill()
                self.node.wait()
        self.head.stop()
        subprocess.run(["rm", "-rf", str(self.temp_dir)], check=False)


def task_ids() -> set[bytes]:
    """Every task Ray has an event for so far (Ray's private GCS accessor: `ray.util.state`
    needs the dashboard, which is not installed)."""
    from ray._private.state import state

    return {event.task_id for event in state._get_all_task_events()}


def tasks_per_node(before: set[bytes]) -> dict[str, tuple[int, float]]:
    """Node ("head" or "second") → (tasks that ran there since `before`, their seconds from
    RUNNING to FINISHED)."""
    import ray
    from ray._private.state import state
    from ray.core.generated.common_pb2 import TaskStatus

    time.sleep(2)  # task events reach the GCS about once a second
    head = ray.get_runtime_context().get_node_id()
    counts: Counter[str] = Counter()
    seconds: Counter[str] = Counter()
    for event in state._get_all_task_events():
        update = event.state_updates
        stamps = update.state_ts_ns
        if event.task_id in before or TaskStatus.FINISHED not in stamps or not update.node_id:
            continue
        node = "head" if update.node_id.hex() == head else "second"
        counts[node] += 1
        seconds[node] += (stamps[TaskStatus.FINISHED] - stamps[TaskStatus.RUNNING]) / 1e9
    return {node: (counts[node], seconds[node]) for node in sorted(counts)}


def two_node_driver(shards: Path, work: Path, warm_up: pa.Table) -> tuple[Outcome, dict]:
    """In a fresh process (Ray keeps one auth token per process): join the cluster through
    RAY_ADDRESS, warm it up, then the timed run and where its tasks ran."""
    import ray

    init_ray(RayParams())
    alive = [node for node in ray.nodes() if node["Alive"]]
    if len(alive) != 2:
        raise RuntimeError(f"expected 2 Ray nodes, found {len(alive)}")
    paperline_filter_dedup(warm_up, workers=2)
    before = task_ids()
    outcome = run_paperline(shards, work, 2)
    placement = tasks_per_node(before)
    ray.shutdown()
    return outcome, placement


def measure_two_nodes(
    shards: Path, scratch: Path, warm_up: pa.Table
) -> tuple[Measurement, dict[str, tuple[int, float]]]:
    import ray

    ray.shutdown()  # this process's single-node Ray
    work = Path(tempfile.mkdtemp(prefix="run-", dir=scratch))
    with TwoNodeRay(scratch), multiprocessing.get_context("spawn").Pool(1) as pool:
        outcome, placement = pool.apply(two_node_driver, (shards, work, warm_up))
    return Measurement("paperline (2 workers, 2 nodes)", [outcome]), placement


# --- report --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    system: str
    outcomes: list[Outcome]

    @property
    def seconds(self) -> float:
        return statistics.median(o.seconds for o in self.outcomes)


def measure(
    system: str, run: Callable[[Path], Outcome], scratch: Path, repeats: int
) -> Measurement:
    """`repeats` runs, each in a fresh folder (datatrove skips tasks it finds completed)."""
    runs = [run(Path(tempfile.mkdtemp(prefix="run-", dir=scratch))) for _ in range(repeats)]
    return Measurement(system, runs)


def print_report(
    measurements: list[Measurement],
    docs: int,
    mb: float,
    placement: dict[str, tuple[int, float]] | None,
) -> None:
    print(f"{'system':<34}{'docs':>9}{'MB':>8}{'seconds':>10}{'docs/s':>10}{'MB/s':>8}")
    for m in measurements:
        print(
            f"{m.system:<34}{docs:>9}{mb:>8.1f}{m.seconds:>10.2f}"
            f"{docs / m.seconds:>10.0f}{mb / m.seconds:>8.2f}"
        )
    print()
    print(f"{'kept documents':<34}{'after filter':>14}{'after dedup':>14}")
    for m in measurements:
        last = m.outcomes[-1]
        print(f"{m.system:<34}{last.after_filter:>14}{last.after_dedup:>14}")
    print()
    digests = {o.digest for m in measurements for o in m.outcomes if o.digest}
    for m in measurements:
        for o in m.outcomes:
            if o.digest:
                print(f"{m.system:<34}sha256 of kept.parquet {o.digest[:16]}")
    print(f"paperline outputs identical in every run and mode: {len(digests) == 1}")
    if placement:
        print()
        print(f"{'two-node run':<34}{'tasks':>8}{'task seconds':>14}")
        for node, (count, seconds) in placement.items():
            print(f"{node + ' node':<34}{count:>8}{seconds:>14.2f}")
    paperline_2, paperline_1, datatrove = (m.seconds for m in measurements[:3])
    print()
    print(f"ratio paperline(2 workers)/datatrove: {datatrove / paperline_2:.2f}x")
    print(f"ratio paperline 2 vs 1 workers: {paperline_1 / paperline_2:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50, help="megabytes of UTF-8 text")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--two-node", action="store_true", help="also run on two local nodes")
    parser.add_argument("--profile", action="store_true", help="cProfile paperline, no timing")
    args = parser.parse_args()

    corpus = replicated_corpus(args.mb)
    docs, mb = corpus.num_rows, text_bytes(corpus) / 1e6
    if args.profile:
        print(f"profile: {docs} documents, {mb:.1f} MB of text, one process")
        profile_paperline(corpus, top=25)
        return
    placement = None
    log = Path(tempfile.gettempdir()) / "corpus_filter_dedup.log"
    print(f"input: {docs} documents, {mb:.1f} MB of text, {DATATROVE_TASKS} Parquet shards")
    print(f"Ray and datatrove logs: {log}")
    with tempfile.TemporaryDirectory(prefix="corpus-bench-") as folder, stderr_to(log):
        init_ray(RayParams(num_cpus=2))
        warm_up = corpus.slice(0, WARM_UP_ROWS)
        paperline_filter_dedup(warm_up, workers=2)
        scratch = Path(folder)
        shards = scratch / "input"
        write_shards(corpus, shards, DATATROVE_TASKS)
        measurements = [
            measure(
                "paperline (2 Ray workers)",
                lambda work: run_paperline(shards, work, 2),
                scratch,
                args.repeats,
            ),
            measure(
                "paperline (1 Ray worker)",
                lambda work: run_paperline(shards, work, 1),
                scratch,
                args.repeats,
            ),
            measure(
                f"datatrove ({DATATROVE_TASKS} workers)",
                lambda work: run_datatrove(shards, work),
                scratch,
                args.repeats,
            ),
        ]
        if args.two_node:
            two_nodes, placement = measure_two_nodes(shards, scratch, warm_up)
            measurements.append(two_nodes)
    print()
    print_report(measurements, docs, mb, placement)


if __name__ == "__main__":
    main()
