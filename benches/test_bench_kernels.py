"""Kernels (axpy, matmul, an MLP layer) against numpy, throughput by stream count for the
tensor workloads, copy/compute overlap, and memory (pool versus raw mappings, copies).

Every kernel benchmark checks its result against numpy once (outside the timing)."""

import mmap

import npurt
import numpy as np
import pytest
from npurt.bench import copies, throughput
from npurt.bench import memory as membench

MiB = 1 << 20


def _checked(runner):
    """Runs each stream once and compares every output with numpy. Use as
    ``with _checked(Runner(...)) as r:`` (the runner's streams are closed on the way out)."""
    try:
        throughput.sample(runner, runner.n)
        throughput.check(runner, npurt.get_config()["worker_threads"])
    except BaseException:
        runner.close()
        raise
    return runner


@pytest.mark.parametrize("workload", ["axpy", "matmul256"])
def test_kernel_npurt(benchmark, workload):
    benchmark.group = f"kernels-{workload}"
    with _checked(throughput.NpurtStreams(throughput.spec(workload), 1)) as r:
        benchmark(throughput.sample, r, 16)


@pytest.mark.parametrize("workload", ["axpy", "matmul256"])
def test_kernel_numpy(benchmark, workload):
    benchmark.group = f"kernels-{workload}"
    with _checked(throughput.NumpyThreads(throughput.spec(workload), 1, threaded=False)) as r:
        benchmark(throughput.sample, r, 16)


@pytest.mark.benchmark(group="kernels-mlp")
@pytest.mark.parametrize("batch", [1, 32])
def test_mlp_npurt(benchmark, batch):
    with _checked(throughput.NpurtStreams(throughput.spec("mlp", batch), 1)) as r:
        benchmark(throughput.sample, r, 8)


@pytest.mark.benchmark(group="kernels-mlp")
@pytest.mark.parametrize("batch", [1, 32])
def test_mlp_numpy(benchmark, batch):
    with _checked(throughput.NumpyThreads(throughput.spec("mlp", batch), 1, threaded=False)) as r:
        benchmark(throughput.sample, r, 8)


@pytest.mark.benchmark(group="streams-tensor")
@pytest.mark.parametrize("workload", ["axpy", "mlp"])
@pytest.mark.parametrize("streams", [1, 2, 8])
def test_tensor_throughput_by_streams(benchmark, workload, streams):
    sp = throughput.spec(workload, 32 if workload == "mlp" else 1)
    with _checked(throughput.NpurtStreams(sp, streams)) as r:
        benchmark.pedantic(throughput.sample, args=(r, 32), rounds=3, iterations=1)


@pytest.mark.benchmark(group="overlap")
@pytest.mark.parametrize("streams", [1, 2, 4])
def test_overlap(benchmark, streams):
    benchmark.pedantic(copies.overlap, args=(streams,), rounds=3, iterations=1)


@pytest.mark.benchmark(group="memory-alloc")
def test_pool_alloc_free_1mib(benchmark):
    m = npurt.malloc
    m(MiB).free()
    benchmark(lambda: m(MiB).free())


@pytest.mark.benchmark(group="memory-alloc")
def test_raw_mmap_alloc_free_1mib(benchmark):
    benchmark(lambda: mmap.mmap(-1, MiB).close())


@pytest.mark.benchmark(group="memory-copy")
def test_h2d_pinned_16mib(benchmark):
    host, dev = npurt.malloc_host(16 * MiB), npurt.malloc(16 * MiB)
    npurt.memset(host, 1)
    benchmark(npurt.memcpy, dev, host)
    dev.free()
    host.free()


@pytest.mark.benchmark(group="memory-copy")
def test_numpy_copyto_16mib(benchmark):
    a = np.ones(16 * MiB, np.uint8)
    b = np.empty_like(a)
    benchmark(np.copyto, b, a)


@pytest.mark.benchmark(group="memory-fragmentation")
def test_fragmentation_replay(benchmark):
    ops = membench._trace(500)
    res = benchmark.pedantic(membench.npurt_replay, args=(ops,), rounds=3, iterations=1)
    benchmark.extra_info["reserved_over_peak_allocated"] = res["reserved_over_peak_allocated"]
    benchmark.extra_info["baseline_first_fit"] = membench.first_fit_ratio(ops)
