"""`dumpkit wer enable | disable | status` (cli.py parses their arguments): Windows Error
Reporting's LocalDumps registry keys, set, removed or shown for an executable.

Windows only; elsewhere it says so in one line."""

from __future__ import annotations

import sys
from typing import Optional

from dumpkit.commands.exits import EXIT_OK, fail

NOT_WINDOWS_WER = "dumpkit wer sets Windows Error Reporting's registry keys: run it on Windows"


def run_wer(action: str, exe: Optional[str], folder: Optional[str], dump_type: str, count: int) -> int:
    if sys.platform != "win32":
        raise fail(NOT_WINDOWS_WER)
    import importlib

    from dumpkit.capture import wer

    try:
        # winreg exists on Windows only: looked up at run time (mypy checks it as Windows)
        registry = importlib.import_module("dumpkit.capture.registry").WindowsRegistry()
        if action == "enable":
            settings = wer.enable(
                registry, exe or "python.exe", folder or r"%LOCALAPPDATA%\CrashDumps", dump_type, count
            )
            print(f"Windows Error Reporting writes a dump of every crash of {settings.exe}:")
            for line in settings.lines():
                print(f"  {line}")
            return EXIT_OK
        if action == "disable":
            name = exe or "python.exe"
            if wer.disable(registry, name):
                print(f"LocalDumps for {name} removed; other programs' keys untouched")
            else:
                print(f"LocalDumps has no key for {name}: nothing to remove")
            return EXIT_OK
        mine, every, names = wer.status(registry, exe)
        if exe:
            if mine is None:
                print(f"{exe}: no LocalDumps key (dumpkit wer enable {exe} sets one)")
            else:
                print(f"{exe}: dumps are written")
                for line in mine.lines():
                    print(f"  {line}")
        if every is not None:
            print("LocalDumps itself (every program without a key of its own):")
            for line in every.lines():
                print(f"  {line}")
        print("executables with a key: " + (", ".join(names) if names else "none"))
        return EXIT_OK
    except wer.WerError as e:
        raise fail(str(e)) from None
    except OSError as e:
        raise fail(f"registry: {e.strerror or e}") from None
