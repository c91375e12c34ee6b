"""Devices: ``npurt.Device``, configuration and device-level functions."""

from __future__ import annotations

from ._npurt import (
    Device,
    configure,
    current_device,
    device_count,
    get_config,
    get_device_properties,
    isa_info,
    reset_device,
    set_device,
    synchronize,
)

__all__ = [
    "Device",
    "configure",
    "current_device",
    "device_count",
    "get_config",
    "get_device_properties",
    "isa_info",
    "reset_device",
    "set_device",
    "synchronize",
]
