"""A program that runs until told to stop, for `dumpkit capture --attach PID` and its Ctrl-C.

Ten times a second it appends a line to STATUS: its process id (the one --attach takes), a
beat count and IsDebuggerPresent(). The test reads them to know that the attach took
(debugged), that the detach did (not debugged) and that the program went on running after it
(the beat grows). It exits with 5 once the file STOP exists, so its exit code says it ended
on its own and was not killed or crashed by the attach."""

import ctypes
import json
import os
import sys
import time

status, stop = sys.argv[1], sys.argv[2]
being_debugged = ctypes.windll.kernel32.IsDebuggerPresent
beat = 0
while not os.path.exists(stop):
    beat += 1
    line = {"pid": os.getpid(), "beat": beat, "debugged": bool(being_debugged())}
    with open(status, "a") as f:  # whole lines: the reader takes the last one ending in \n
        f.write(json.dumps(line) + "\n")
    time.sleep(0.1)
sys.exit(5)
