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
