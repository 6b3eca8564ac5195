"""The format-neutral view: what each report shows, as plain typed data that every
renderer (text, Markdown, HTML, DML, `info`, `stack`, `explain`) lays out in its own
markup. Renderers import this package and dumpkit.analysis.model, nothing else of dumpkit
but their escaping (import-linter keeps it so)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The names below are the package's; each part is imported when a name of it is first
# asked for, so `dumpkit explain` (view.explanation) does not pay for the report's parts
# and the analysis model behind them (~100 ms). mypy reads the imports as written.
if TYPE_CHECKING:
    from dumpkit.report.view.inline import CODE, LITERAL, PROSE, TEXT, THREAD, WORDS, Line, Span, plain
    from dumpkit.report.view.python import PythonFrameRow, PythonStackView, PythonView, python_view
    from dumpkit.report.view.report import (
        CodeRow,
        CodeView,
        CollisionView,
        Fact,
        Facts,
        FrameSizeHeaders,
        FrameSizeRow,
        FrameSizeTable,
        RecursionView,
        Remark,
        ImagesView,
        ReportView,
        Threads,
        VerdictView,
        WaitRow,
        WaitsView,
        report_view,
    )
    from dumpkit.report.view.stacks import (
        DOCUMENT,
        HEADERS,
        KF,
        REPORT,
        Fold,
        FrameRow,
        ModuleImage,
        StacksView,
        StackHeaders,
        StackTable,
        ThreadGroup,
        ThreadView,
        cut_table,
        kf_number,
        stacks_view,
    )

__all__ = [
    "CodeRow",
    "CodeView",
    "CollisionView",
    "CODE",
    "DOCUMENT",
    "HEADERS",
    "KF",
    "LITERAL",
    "PROSE",
    "REPORT",
    "TEXT",
    "THREAD",
    "WORDS",
    "Fact",
    "Facts",
    "Fold",
    "FrameRow",
    "FrameSizeHeaders",
    "FrameSizeRow",
    "FrameSizeTable",
    "Line",
    "ModuleImage",
    "PythonFrameRow",
    "PythonStackView",
    "PythonView",
    "RecursionView",
    "Remark",
    "ImagesView",
    "ReportView",
    "Span",
    "StackHeaders",
    "StackTable",
    "StacksView",
    "ThreadGroup",
    "ThreadView",
    "Threads",
    "VerdictView",
    "WaitRow",
    "WaitsView",
    "cut_table",
    "kf_number",
    "plain",
    "python_view",
    "report_view",
    "stacks_view",
]

_PARTS = ("inline", "stacks", "python", "report")


def __getattr__(name: str) -> Any:
    if name in __all__:
        for part in _PARTS:
            module = importlib.import_module(f"{__name__}.{part}")
            if hasattr(module, name):
                value = getattr(module, name)
                globals()[name] = value
                return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
