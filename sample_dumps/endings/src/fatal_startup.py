"""Never runs: the interpreter dies at start-up, before any Python code.

The application folder holds python.org's embeddable CPython whose ._pth names
python3X.zip (the standard library), but the zip is missing from the folder. Start-up fails
before this script is read (the exact lines: logs/fatal_startup_py3X.log; the encodings
package cannot be imported, after a "Python path configuration:" block). A start-up error is not an abort: python.exe
ends through Py_ExitStatusException -> exit(1), exit code 1, the C runtime's normal exit.
If it ever ran, it would print a MARKER like the other programs.
"""

import json
import sys
import threading

print("MARKER " + json.dumps({"scenario": "fatal_startup", "python": sys.version,
                              "executable": sys.executable,
                              "crash_native_id": threading.get_native_id()}), flush=True)
