"""`dumpkit capture`: run a program (or attach to one) under a debug loop on Windows and
write the dump its crash needs: a minidump with the memory of every thread's Python stack
added (pymemory, amend), or a full-memory dump. `dumpkit wer`: Windows Error Reporting's
LocalDumps for an executable. The Win32 parts (win32, live, debugger, wer) run on Windows
only; the rest is pure and tested anywhere."""
