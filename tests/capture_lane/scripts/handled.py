"""An access violation the program handles itself: ctypes turns it into OSError. A capture
must not dump it, and must exit with the program's own code."""

import ctypes
import sys

try:
    ctypes.string_at(0x10)
except OSError as e:
    print("handled:", e, flush=True)
sys.exit(7)
