"""Streams: ``npurt.Stream`` and the current-stream helpers."""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional

from ._npurt import Stream, current_stream, default_stream

__all__ = ["Stream", "current_stream", "default_stream", "stream"]


@contextlib.contextmanager
def stream(s: Optional[Stream]) -> Iterator[Optional[Stream]]:
    """torch-style ``with npurt.stream(s):``; ``None`` leaves the current stream as is."""
    if s is None:
        yield None
        return
    if not isinstance(s, Stream):
        from .exceptions import InvalidTypeError

        raise InvalidTypeError(f"npurt.stream() takes an npurt.Stream or None, not {type(s).__name__}")
    with s:
        yield s
