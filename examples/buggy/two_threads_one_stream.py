"""Buggy on purpose (synccheck: a portability error). Two host threads feed one pyACL
stream; ACL streams are not thread-safe. npurt's lock-free ring makes this work, the card
does not promise it.

    NPURT_SANITIZER=all python examples/buggy/two_threads_one_stream.py

reports one ``Stream ... is fed by two host threads`` block with both launch lines."""

import threading

import npurt.acl as acl
import numpy as np

N = 4096


def upload(ctx, stream, dev, host):
    acl.rt.set_context(ctx)
    acl.rt.memcpy_async(dev, N, host, N, 1, stream)  # ACL_MEMCPY_HOST_TO_DEVICE


def main():
    acl.init()
    acl.rt.set_device(0)
    ctx, _ = acl.rt.create_context(0)
    stream, _ = acl.rt.create_stream()
    devs = [acl.rt.malloc(N, 0)[0] for _ in range(2)]
    hosts = [acl.rt.malloc_host(N)[0] for _ in range(2)]
    upload(ctx, stream, devs[0], hosts[0])
    t = threading.Thread(target=upload, args=(ctx, stream, devs[1], hosts[1]))  # BUG: a second thread
    t.start()
    t.join()
    acl.rt.synchronize_stream(stream)
    for d in devs:
        acl.rt.free(d)
    for h in hosts:
        acl.rt.free_host(h)
    acl.rt.destroy_stream(stream)
    acl.rt.destroy_context(ctx)
    acl.rt.reset_device(0)
    acl.finalize()
    _ = np


if __name__ == "__main__":
    main()
