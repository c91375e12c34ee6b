"""`npurt._npurt._BufferView` and the `_view_*` copies (the raw-pointer layer under
npurt.acl): byte ranges inside allocations, range checks, typed errors."""

import npurt
import numpy as np
import pytest
from npurt import _npurt

View = _npurt._BufferView


def test_views_copy_and_set_inside_allocations():
    with npurt.malloc(4096) as dev, npurt.malloc_host(4096) as host:
        host.numpy(np.uint8)[:] = np.arange(4096, dtype=np.uint32).astype(np.uint8)
        src, dst = View(host, 100, 1000), View(dev, 2000, 1000)
        assert (dst.ptr, dst.nbytes, dst.offset, dst.device, dst.is_device) == (dev.ptr + 2000, 1000, 2000, 0, True)
        assert src.device is None and not src.is_device
        _npurt._view_memcpy(dst, src, 1000)
        back = View(host, 3000, 1000)
        _npurt._view_memset(back, 7, 1000)
        s = npurt.Stream()
        _npurt._view_memcpy_async(back, dst, 600, s)
        _npurt._view_memset_async(View(host, 3600, 400), 9, 400, s)
        s.synchronize()
        h = host.numpy(np.uint8)
        assert (h[3000:3600] == h[100:700]).all()
        assert (h[3600:4000] == 9).all()


@pytest.mark.parametrize(
    "args, exc",
    [
        (("not a buffer", 0, 1), npurt.InvalidTypeError),
        ((None, 0, 1), npurt.InvalidTypeError),
        (("dev", 4000, 200), npurt.InvalidValueError),  # past the end
        (("dev", 0, 0), npurt.InvalidValueError),  # empty
        (("dev", -1, 10), npurt.InvalidValueError),
        (("dev", 0, "10"), npurt.InvalidTypeError),
    ],
)
def test_bad_views_are_typed_errors(args, exc):
    with npurt.malloc(4096) as dev:
        args = tuple(dev if a == "dev" else a for a in args)
        with pytest.raises(exc):
            View(*args)


@pytest.mark.npurt_sanitizer(expect=["out-of-bounds"])  # misuse on purpose: the sanitizer must see it
def test_bad_copy_arguments_are_typed_errors():
    with npurt.malloc(4096) as dev:
        a, b = View(dev, 0, 1024), View(dev, 2048, 2048)
        with pytest.raises(npurt.InvalidTypeError):
            _npurt._view_memcpy(dev, a, 16)  # a buffer, not a view
        with pytest.raises(npurt.InvalidValueError):
            _npurt._view_memcpy(a, b, 2048)  # more than dst holds
        with pytest.raises(npurt.InvalidValueError):
            _npurt._view_memset(a, 256, 16)
        with pytest.raises(npurt.InvalidTypeError):
            _npurt._view_memset_async(a, 1, 16, "stream")
    # The view holds the allocation, but the freed buffer's handle is dead.
    with pytest.raises(npurt.InvalidHandleError):
        a.check()
    with pytest.raises(npurt.InvalidHandleError):
        _npurt._view_memset(a, 0, 16)
