"""faulthandler._read_null(): a read of address 0 inside python38.dll.

faulthandler is enabled, as pytest and many services do; the crash reporter
sees the access violation first (first chance, before faulthandler's vectored
handler runs), so the dump is of the real fault.
"""

import faulthandler
import json
import sys


def poke():
    faulthandler._read_null()  # stack


def main():
    faulthandler.enable()
    facts = {
        "scenario": "faulthandler_null",
        "python": sys.version,
        "executable": sys.executable,
        "faulthandler_enabled": faulthandler.is_enabled(),
    }
    print("MARKER " + json.dumps(facts), flush=True)
    poke()  # stack


main()  # stack
