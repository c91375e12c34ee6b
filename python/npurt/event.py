"""Events: ``npurt.Event``."""

from __future__ import annotations

from ._npurt import Event

__all__ = ["Event"]
