"""``python -m npurt.bench``."""

from __future__ import annotations

import sys
import threading

from .cli import main

threading.current_thread().name = "npurt-bench"
sys.exit(main())
