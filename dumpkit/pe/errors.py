"""The one exception of the PE reader."""

from __future__ import annotations


class PEError(Exception):
    """The image (or the part of it asked for) cannot be read or is malformed. One line."""
