"""``acl.rt``: the runtime calls of pyacl (devices, contexts, streams, events, memory,
copies, user-thread callbacks, IPC memory). Every call returns ``ret`` or ``(value..., ret)`` with
ACL's integer codes; see docs/COMPAT.md for each call and where npurt differs."""

from __future__ import annotations

from .rt_callback import *  # noqa: F403
from .rt_callback import __all__ as _cb
from .rt_copy import *  # noqa: F403
from .rt_copy import __all__ as _cp
from .rt_device import *  # noqa: F403
from .rt_device import __all__ as _dv
from .rt_dialect import *  # noqa: F403
from .rt_dialect import __all__ as _dl
from .rt_ipc import *  # noqa: F403
from .rt_ipc import __all__ as _ipc
from .rt_memory import *  # noqa: F403
from .rt_memory import __all__ as _mm
from .rt_status import *  # noqa: F403
from .rt_status import __all__ as _ss
from .rt_stream import *  # noqa: F403
from .rt_stream import __all__ as _st

__all__ = sorted(_cb + _cp + _dv + _dl + _ipc + _mm + _ss + _st)
