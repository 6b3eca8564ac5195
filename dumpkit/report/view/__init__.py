"""The format-neutral view: what each report shows, as plain typed data that every
renderer (text, Markdown, HTML, DML, `info`, `stack`, `explain`) lays out in its own
markup. Renderers import this package and dumpkit.analysis.model, nothing else of dumpkit
but their escaping (import-linter keeps it so)."""

from dumpkit.report.view.inline import CODE, LITERAL, PROSE, TEXT, THREAD, WORDS, Line, Span, plain
from dumpkit.report.view.python import PythonFrameRow, PythonStackView, PythonView, python_view
from dumpkit.report.view.report import (
    Fact,
    Facts,
    FrameSizeRow,
    FrameSizeTable,
    RecursionView,
    Remark,
    ImagesView,
    ReportView,
    Threads,
    VerdictView,
    report_view,
)
from dumpkit.report.view.stacks import (
    DOCUMENT,
    KF,
    REPORT,
    Fold,
    FrameRow,
    ModuleImage,
    StacksView,
    StackTable,
    ThreadGroup,
    ThreadView,
    kf_number,
    stacks_view,
)

__all__ = [
    "CODE",
    "DOCUMENT",
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
    "StackTable",
    "StacksView",
    "ThreadGroup",
    "ThreadView",
    "Threads",
    "VerdictView",
    "kf_number",
    "plain",
    "python_view",
    "report_view",
    "stacks_view",
]
