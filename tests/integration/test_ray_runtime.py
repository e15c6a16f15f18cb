import pytest

from tasks.core.params import RayParams
from tasks.core.ray_runtime import init_ray

pytestmark = pytest.mark.integration


def test_local_ray_runs_tasks_and_data_with_configured_cpus(ray_session):
    ray = ray_session
    assert ray.cluster_resources()["CPU"] == 2

    @ray.remote
    def square(x):
        return x * x

    assert ray.get([square.remote(i) for i in range(4)]) == [0, 1, 4, 9]
    doubled = ray.data.range(20).map_batches(lambda b: {"id": b["id"] * 2}).sum("id")
    assert doubled == 2 * sum(range(20))


def test_second_init_reuses_the_running_instance(ray_session):
    before = ray_session.get_runtime_context().get_job_id()
    init_ray(RayParams(num_cpus=1))
    assert ray_session.get_runtime_context().get_job_id() == before
    assert ray_session.cluster_resources()["CPU"] == 2


def test_the_in_memory_dataset_has_the_rows_of_the_materialized_read_in_order(
    ray_session, tmp_path
):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tasks.core.errors import InputError
    from tasks.core.ray_runtime import parquet_dataset_in_memory, read_parquet_dataset

    for shard, start in enumerate((0, 7, 9)):  # uneven files, names in order
        rows = list(range(start * 10, start * 10 + 5 + shard))
        table = pa.table({"input_ids": [[r, r + 1] for r in rows], "other": rows})
        pq.write_table(table, tmp_path / f"shard-{shard:05d}.parquet")
    context = ray_session.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    read = read_parquet_dataset(tmp_path, ["input_ids"]).materialize().take_all()
    in_memory = parquet_dataset_in_memory(tmp_path, ["input_ids"])
    assert in_memory.take_all() == read and len(read) == 18
    assert in_memory.columns() == ["input_ids"]
    with pytest.raises(InputError, match="no Parquet files"):
        parquet_dataset_in_memory(tmp_path / "missing", ["input_ids"])
