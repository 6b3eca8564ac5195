"""Stand-ins for things dumpkit meets only on Windows (pykd inside WinDbg)."""
