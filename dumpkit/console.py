"""What a Windows console and Windows pipes need before dumpkit writes to them, and how a
command line is quoted for the shell the user has. Imports nothing heavy: the front door
calls it first.

- A pipe or a `> file` gets the ANSI code page (cp1252, cp932...) with strict errors, so a
  dump path or a report outside it (the pictures' arrows, a user's name in a path) would
  end the command with a traceback: standard output is made UTF-8 there (what the HTML
  page declares anyway), with backslash escapes as the last resort.
- A cmd or PowerShell console shows escape sequences as text unless virtual-terminal
  processing is switched on for it: it is, before any colour is written, and colour is
  left off when the console refuses.
- Hints name a file the way the user's shell reads it: cmd.exe keeps POSIX single quotes
  as part of the name."""

from __future__ import annotations

import os
import sys

ENABLE_VIRTUAL_TERMINAL_PROCESSING = 0x0004
STD_OUTPUT_HANDLE = -11


def prepare_streams() -> None:
    """On Windows, a standard output that is not a console writes UTF-8 (reports, JSON,
    HTML). Standard error keeps Python's own choice, which already escapes what its code
    page lacks: its one-line messages stay one line."""
    if os.name != "nt":
        return
    reconfigure = getattr(sys.stdout, "reconfigure", None)  # a text stream of io's; not a test's capture
    if reconfigure is None:
        return
    try:
        if not sys.stdout.isatty():
            reconfigure(encoding="utf-8", errors="backslashreplace")
    except (OSError, ValueError):
        pass


def colour_ready() -> bool:
    """Whether escape sequences will show as colour on this standard output: always off
    Windows; on Windows, once the console's virtual-terminal processing is on (switched
    on here; False when the console refuses, e.g. an old conhost)."""
    if os.name != "nt":
        return True
    try:
        import ctypes
        from ctypes import wintypes

        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined,unused-ignore]
        handle = kernel32.GetStdHandle(STD_OUTPUT_HANDLE)
        mode = wintypes.DWORD()
        if not kernel32.GetConsoleMode(handle, ctypes.byref(mode)):
            return False
        if mode.value & ENABLE_VIRTUAL_TERMINAL_PROCESSING:
            return True
        return bool(kernel32.SetConsoleMode(handle, mode.value | ENABLE_VIRTUAL_TERMINAL_PROCESSING))
    except (AttributeError, OSError):
        return False


# what a POSIX shell takes literally in a word, as shlex.quote's rule has it (ASCII letters,
# digits and these marks): a path of only these is written as it is
_SHELL_LITERAL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-")


def shell_quote(path: str) -> str:
    """`path` quoted for the user's shell: cmd.exe's rules on Windows, POSIX elsewhere
    (shlex.quote's result, tests/test_console.py compares: shlex's import is ~0.4 ms of
    every multi-thread text report, which quotes the dump's path in its last line)."""
    if os.name == "nt":
        import subprocess

        return subprocess.list2cmdline([path])
    if path and _SHELL_LITERAL.issuperset(path):
        return path
    return "'" + path.replace("'", "'\"'\"'") + "'"  # each ' closes the quote, is quoted, reopens it
