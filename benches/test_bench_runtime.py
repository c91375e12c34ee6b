"""Launch, synchronisation and event costs, and throughput versus stream count."""

import npurt
import pytest
from npurt.bench import baselines, throughput

N = 10_000


@pytest.mark.benchmark(group="launch")
def test_launch_empty_npurt(benchmark, stream):
    empty = npurt.kernels.empty

    def run():
        for _ in range(N):
            empty(stream=stream)
        stream.synchronize()

    benchmark(run)


@pytest.mark.benchmark(group="launch")
def test_launch_empty_python_threads(benchmark):
    s = baselines.PyStream()

    def run():
        for _ in range(N):
            s.launch(baselines.nop)
        s.synchronize()

    benchmark(run)
    s.close()


@pytest.mark.benchmark(group="launch")
def test_launch_empty_pocl(benchmark):
    try:
        r = baselines.PoclRunner()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"PoCL unavailable: {e}")

    def run():
        for _ in range(N // 10):
            r.launch()
        r.synchronize()

    benchmark(run)


@pytest.mark.benchmark(group="sync")
def test_round_trip_npurt(benchmark, stream):
    def run():
        npurt.kernels.empty(stream=stream)
        stream.synchronize()

    benchmark(run)


@pytest.mark.benchmark(group="sync")
def test_round_trip_python_threads(benchmark):
    s = baselines.PyStream()

    def run():
        s.launch(baselines.nop)
        s.synchronize()

    benchmark(run)
    s.close()


@pytest.mark.benchmark(group="events")
def test_event_hop_npurt(benchmark):
    a, b, ev = npurt.Stream(), npurt.Stream(), npurt.Event()

    def run():
        npurt.kernels.empty(stream=a)
        ev.record(a)
        b.wait_event(ev)
        npurt.kernels.empty(stream=b)
        b.synchronize()

    benchmark(run)
    a.destroy()
    b.destroy()


@pytest.mark.benchmark(group="streams")
@pytest.mark.parametrize("streams", [1, 2, 8, 64])
def test_busy_throughput_by_streams(benchmark, streams):
    with throughput.NpurtStreams(throughput.spec("busy"), streams) as runner:
        benchmark.pedantic(throughput.sample, args=(runner, 64), rounds=3, iterations=1)
