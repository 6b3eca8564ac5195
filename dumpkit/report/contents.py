"""`dumpkit info` as text: what a dump holds, in lines and tables decided by
report.view.contents. Every dump-derived string goes through escape.clean into rich Text
objects, never markup."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from dumpkit.analysis.model import Contents
from dumpkit.report.escape import clean
from dumpkit.report.view import WORDS, Line
from dumpkit.report.view.contents import HEADING, SECONDARY, InfoLine, Table, contents_view

_STYLES = {HEADING: "bold", SECONDARY: "dim"}


def _text(line: Line, style: str = "") -> Text:
    return Text("".join(s.text if s.kind == WORDS else clean(s.text, s.limit) for s in line), style=style)


def _line(c: Console, line: InfoLine) -> None:
    c.print(_text(line.text, _STYLES.get(line.emphasis, "")))


def _table(c: Console, table: Table, long_column: str = "", fold: bool = False) -> None:
    """`long_column`: the one column that may wrap (the others keep their values whole)."""
    if not table.rows and table.empty:
        c.print(Text(table.empty))
        return
    out = RichTable(title=table.title, title_justify="left", box=None, header_style="bold")
    for col in table.columns:
        if long_column:
            out.add_column(col, no_wrap=col != long_column, overflow="fold" if fold else "ellipsis")
        else:
            out.add_column(col)
    for row in table.rows:
        out.add_row(*(_text((cell,)) for cell in row))
    c.print(out)


def render_contents(d: Contents, console: Console) -> None:
    view = contents_view(d)
    for line in view.head:
        _line(console, line)
    _table(console, view.threads)
    _table(console, view.modules, long_column="path", fold=True)
    _table(console, view.debug_records, long_column="pdb")
    _table(console, view.unloaded)
    for line in view.tail:
        _line(console, line)
    if view.problems:
        console.print(Text("Problems met while reading (the rest stands):", style="bold"))
        for e in view.problems:
            console.print(Text(f"  - {clean(e, 1000)}"))
