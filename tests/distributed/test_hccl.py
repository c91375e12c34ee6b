"""npurt.hccl in one process: HcclCommInitAll with one thread driving every rank, HCCL's
argument order, enum values, return codes, acl.rt.malloc pointers."""

import npurt
import numpy as np
from npurt import hccl


def test_enum_values_follow_hccl():
    assert hccl.HCCL_ROOT_INFO_BYTES == 4108
    assert (hccl.HCCL_SUCCESS, hccl.HCCL_E_PARA, hccl.HCCL_E_INTERNAL, hccl.HCCL_E_TIMEOUT, hccl.HCCL_E_REMOTE) == (0, 1, 4, 9, 21)
    assert (hccl.HCCL_DATA_TYPE_INT8, hccl.HCCL_DATA_TYPE_FP16, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_DATA_TYPE_FP64, hccl.HCCL_DATA_TYPE_BFP16) == (0, 3, 4, 10, 11)
    assert (hccl.HCCL_REDUCE_SUM, hccl.HCCL_REDUCE_PROD, hccl.HCCL_REDUCE_MAX, hccl.HCCL_REDUCE_MIN) == (0, 1, 2, 3)


def test_comm_init_all_one_thread_drives_every_rank():
    comms, ret = hccl.HcclCommInitAll(2, [0, 1])
    assert ret == hccl.HCCL_SUCCESS and [hccl.HcclGetRankId(c)[0] for c in comms] == [0, 1]
    assert hccl.HcclGetRankSize(comms[0]) == (2, hccl.HCCL_SUCCESS)
    streams = [npurt.Stream(device=d) for d in (0, 1)]
    xs = [npurt.to_device(np.arange(6, dtype=np.float32) * (d + 1), device=d) for d in (0, 1)]
    ys = [npurt.empty((6,), "float32", device=d) for d in (0, 1)]
    for d in (0, 1):
        assert hccl.HcclAllReduce(xs[d], ys[d], 6, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_MAX, comms[d], streams[d]) == 0
    gathered = [npurt.empty((12,), "float32", device=d) for d in (0, 1)]
    for d in (0, 1):
        assert hccl.HcclAllGather(xs[d], gathered[d], 6, hccl.HCCL_DATA_TYPE_FP32, comms[d], streams[d]) == 0
        assert hccl.HcclBroadcast(xs[d], 6, hccl.HCCL_DATA_TYPE_FP32, 1, comms[d], streams[d]) == 0
        assert hccl.HcclBarrier(comms[d], streams[d]) == 0
    for s in streams:
        s.synchronize(timeout=30)
    for d in (0, 1):
        assert ys[d].to_host().tolist() == (np.arange(6) * 2.0).tolist()
        assert gathered[d].to_host().tolist() == np.concatenate([np.arange(6), np.arange(6) * 2.0]).tolist()
        assert xs[d].to_host().tolist() == (np.arange(6) * 2.0).tolist()
    assert hccl.HcclAllReduce(xs[0], ys[0], 600, hccl.HCCL_DATA_TYPE_FP32, 0, comms[0], streams[0]) == hccl.HCCL_E_PARA
    assert "needed" in hccl.get_last_error_message()
    assert hccl.HcclAllReduce(xs[0], ys[0], 6, 99, 0, comms[0], streams[0]) == hccl.HCCL_E_PARA
    # buffers that overlap without being the same: HCCL_E_PARA before anything runs (a partial
    # overlap would read input that a piece of the output already overwrote)
    big = npurt.to_device(np.arange(12, dtype=np.float32), device=0)
    for send, recv in ((big[0:6], big[3:9]), (big[3:9], big[0:6])):
        assert hccl.HcclAllReduce(send, recv, 6, hccl.HCCL_DATA_TYPE_FP32, 0, comms[0], streams[0]) == hccl.HCCL_E_PARA
        assert "overlap" in hccl.get_last_error_message()
        assert hccl.HcclReduce(send, recv, 6, hccl.HCCL_DATA_TYPE_FP32, 0, 0, comms[0], streams[0]) == hccl.HCCL_E_PARA
    assert big.to_host().tolist() == list(range(12))
    for c in comms:
        assert hccl.HcclCommDestroy(c) == 0


def test_acl_pointers_and_send_recv():
    import npurt.acl as acl

    comms, _ = hccl.HcclCommInitAll(2)
    s0, s1 = npurt.Stream(device=0), npurt.Stream(device=0)
    a = np.arange(8, dtype=np.int32)
    p, ret = acl.rt.malloc(a.nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    q, ret = acl.rt.malloc(a.nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    acl.rt.memcpy(p, a.nbytes, a.ctypes.data, a.nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE)
    assert hccl.HcclSend(p, 8, hccl.HCCL_DATA_TYPE_INT32, 1, comms[0], s0) == 0
    assert hccl.HcclRecv(q, 8, hccl.HCCL_DATA_TYPE_INT32, 0, comms[1], s1) == 0
    s0.synchronize(timeout=30)
    s1.synchronize(timeout=30)
    out = np.zeros(8, np.int32)
    acl.rt.memcpy(out.ctypes.data, out.nbytes, q, a.nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST)
    assert out.tolist() == a.tolist()
    acl.rt.free(p)
    acl.rt.free(q)
    for c in comms:
        hccl.HcclCommDestroy(c)
