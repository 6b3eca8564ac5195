"""HKLM through winreg, for wer.py. Windows only (the platform assert also tells type
checkers to skip it elsewhere)."""

from __future__ import annotations

import sys

assert sys.platform == "win32"

import winreg  # noqa: E402
from typing import Dict, List, Optional  # noqa: E402


class WindowsRegistry:
    """HKLM through winreg, 64-bit view (WER reads the native one)."""

    def __init__(self) -> None:
        self._winreg = winreg
        self._view = winreg.KEY_WOW64_64KEY

    def values(self, path: str) -> Optional[Dict[str, object]]:
        w = self._winreg
        try:
            key = w.OpenKey(w.HKEY_LOCAL_MACHINE, path, 0, w.KEY_READ | self._view)
        except FileNotFoundError:
            return None
        out: Dict[str, object] = {}
        with key:
            for i in range(256):
                try:
                    name, value, _ = w.EnumValue(key, i)
                except OSError:
                    break
                out[name] = value
        return out

    def subkeys(self, path: str) -> List[str]:
        w = self._winreg
        try:
            key = w.OpenKey(w.HKEY_LOCAL_MACHINE, path, 0, w.KEY_READ | self._view)
        except FileNotFoundError:
            return []
        names = []
        with key:
            for i in range(4096):
                try:
                    names.append(w.EnumKey(key, i))
                except OSError:
                    break
        return names

    def set(self, path: str, name: str, kind: int, value: object) -> None:
        w = self._winreg
        with w.CreateKeyEx(w.HKEY_LOCAL_MACHINE, path, 0, w.KEY_SET_VALUE | self._view) as key:
            w.SetValueEx(key, name, 0, kind, value)

    def delete_key(self, path: str) -> None:
        w = self._winreg
        w.DeleteKeyEx(w.HKEY_LOCAL_MACHINE, path, self._view, 0)
