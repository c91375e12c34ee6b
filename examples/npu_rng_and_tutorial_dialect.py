"""torch_npu-style seeding and random arrays, and the dialect CANN tutorials write.

The first half is ``torch.npu`` code: seed the device generator, draw on a side stream,
save the generator state, draw again, restore the state and check the replay is bitwise
identical (what dropout-recompute and checkpointing code relies on). The second half is
the loose dialect articles teach and people paste — ``npu.stream(priority=0)`` creating a
prioritised stream, ``npu.H2D`` / ``npu.D2H`` copies — which npurt accepts as documented
aliases (docs/COMPAT.md: "tutorial dialect, not in torch_npu").
"""

import sys

import npurt
import numpy as np
from npurt import npu


def seeded_replay():
    npu.manual_seed(1234)
    assert npu.initial_seed() == 1234
    side = npu.Stream(priority=-1)
    with npu.stream(side):
        noise = npurt.random.randn((256, 256))  # queued on `side`, from device 0's generator
        state = npu.get_rng_state()  # 16 bytes: seed, then the next counter block
        mask = npurt.random.rand((256, 256))
    side.synchronize()
    npu.set_rng_state(state)
    with npu.stream(side):
        again = npurt.random.rand((256, 256))
    same = np.array_equal(np.asarray(mask).view(np.uint32), np.asarray(again).view(np.uint32))
    z = np.asarray(noise).astype(np.float64)
    moments_ok = abs(z.mean()) < 0.02 and abs(z.std() - 1.0) < 0.02
    side.destroy()
    return same and moments_ok


def tutorial_pipeline():
    """An article's H2D → compute → D2H loop, on a prioritised stream, pasted as written."""
    rng = np.random.default_rng(0)
    host_in = [rng.random((64, 64), dtype=np.float32) for _ in range(4)]
    w = npu.H2D(np.eye(64, dtype=np.float32) * 2.0)
    results = []
    with npu.stream(priority=0) as s:  # dialect: a new stream with torch priority 0
        for x in host_in:
            dev_x = npu.H2D(x, stream=s)  # host → device on the copy engine
            y = dev_x @ w  # runs on s, the current stream
            results.append(npu.D2H(y, stream=s))  # device → host, after the matmul
    return all(np.allclose(r, x * 2.0) for r, x in zip(results, host_in, strict=True))


def main():
    npu.set_device("npu:0")
    ok_replay = seeded_replay()
    ok_pipeline = tutorial_pipeline()
    print(f"replay identical and N(0,1) moments: {ok_replay}; tutorial pipeline correct: {ok_pipeline}")
    if ok_replay and ok_pipeline:
        print("npu_rng_and_tutorial_dialect: OK")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
