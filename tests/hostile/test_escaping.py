"""Strings from the dump (module names, paths, thread names) come out escaped for each
output format, shown on real sample dumps whose module and thread names were rewritten
(tests/hostile/corpus.py: MINIDUMP_STRINGs appended, a ThreadNames stream added)."""

from __future__ import annotations

import json
import re

import pytest

from tests.hostile.corpus import ANSI_NAME, BACKTICK_NAME, HOSTILE_NAMES, LINK_NAME, SAMPLES, SCRIPT_NAME, build_corpus
from tests.support.measured import run_cli

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (SAMPLES / "null_deref.dmp").exists(), reason="sample dumps not present"),
]

CASES = ("hostile_names_null_deref", "hostile_names_recursion_cycle3")
FORMATS = ("text", "markdown", "html", "json")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    cases = {c.name: c for c in build_corpus(tmp_path_factory.mktemp("esc"), extra_cuts=0) if c.name in CASES}
    out = {}
    for name, case in cases.items():
        for fmt in FORMATS:
            args = ["analyze", case.path, "--format", fmt]
            for d in case.image_paths:
                args += ["--image-path", d]
            if fmt == "text":
                args.append("--color")  # a terminal: the place escape sequences would act
            r = run_cli(args)
            # exit 1 only because a 32,767-character file name is cut to NTFS's 255
            assert r.code in (0, 1) and "Traceback" not in r.stderr, (name, fmt, r.stderr)
            out[name, fmt] = r.stdout
    return cases, out


@pytest.mark.parametrize("case", CASES)
@pytest.mark.slow
def test_json_is_valid_and_keeps_names_as_the_dump_holds_them(hostile, case):
    cases, out = hostile
    text = out[case, "json"]
    assert "\x1b" not in text and text.isascii()  # \u001b escapes, never the byte
    doc = json.loads(text)
    paths = [m["path"] for m in doc["modules"]]
    for name in HOSTILE_NAMES:
        assert any(p.endswith(name) for p in paths), name
    names = {t["tid"]: t["name"] for t in doc["threads"]}
    for tid, name in cases[case].notes["thread_names"].items():
        assert names[tid] == name


@pytest.mark.parametrize("case", CASES)
def test_text_has_no_terminal_control_sequences(hostile, case):
    _cases, out = hostile
    text = out[case, "text"]
    # The report itself is coloured (--color): every ESC must be one of rich's SGR codes.
    stripped = re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert "\x1b" not in stripped
    assert "\x07" not in text and "\x08" not in text and "\u202e" not in text
    assert "\r" not in text
    assert "]0;pwned" not in text or "\x1b]0;pwned" not in text
    assert "EVIL" in stripped  # the name is shown, defused
    plain = run_cli(["analyze", _cases[case].path, "--format", "text"]).stdout
    assert "\x1b" not in plain and "EVIL" in plain


def _markdown_to_html(md: str) -> str:
    from markdown_it import MarkdownIt  # rich depends on it

    return MarkdownIt("commonmark", {"html": True}).enable("table").render(md)


@pytest.mark.parametrize("case", CASES)
def test_markdown_does_not_become_html_links_or_broken_code(hostile, case):
    _cases, out = hostile
    md = out[case, "markdown"]
    html = _markdown_to_html(md)
    assert "<script" not in html.lower()
    assert 'href="http://evil' not in html and 'src="http://evil' not in html
    assert "<b>x</b>" not in html  # the backtick name did not break out of its code span
    assert "\x1b" not in md
    # Fences stay balanced: only our own ``` lines open and close them.
    fences = [ln for ln in md.splitlines() if ln.lstrip().startswith("```")]
    assert all(ln.strip() == "```" for ln in fences) and len(fences) % 2 == 0
    # <details> blocks opened by the renderer are all closed by it (a name cannot close one).
    assert html.count("<details>") == html.count("</details>")
    # Hostile names are visible as text.
    assert "alert(1)" in html
    # Table rows keep their cells: a `|` in a name inside a cell is escaped.
    for line in md.splitlines():
        if line.startswith("| ") and ("EVIL" in line or "pipe" in line):
            assert line.replace("\\|", "").count("|") in (3, 5), line


def test_markdown_table_with_pipe_in_function_name():
    from markdown_it import MarkdownIt

    from dumpkit.report.markdown import cell_code

    md = "| # | function |\n|---|---|\n| 1 | " + cell_code("a|b.dll!f|g") + " |\n"
    html = MarkdownIt("commonmark").enable("table").render(md)
    assert html.count("<td>") == 2 and "a|b.dll!f|g" in html


@pytest.mark.parametrize("case", CASES)
def test_html_escapes_everything(hostile, case):
    _cases, out = hostile
    html = out[case, "html"]
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "href=" not in html and "\x1b" not in html and "\x07" not in html
    assert "<b>x</b>" not in html


def test_escape_helpers_directly():
    from dumpkit.report.escape import clean, html_text, markdown, markdown_code

    for name in HOSTILE_NAMES:
        for f in (clean, markdown, markdown_code, html_text):
            s = f(name)
            assert "\x1b" not in s and "\n" not in s and "\r" not in s
    assert "<" not in html_text(SCRIPT_NAME)
    assert re.search(r"(?<!\\)\]\(", markdown(LINK_NAME)) is None  # every "](" has its "]" escaped
    assert markdown_code(BACKTICK_NAME).count("`") == 2
    assert "\x1b" not in clean(ANSI_NAME) and len(clean("x" * 100_000)) < 1000


@pytest.mark.parametrize("name", HOSTILE_NAMES + ("a`<b>x</b>`b.dll", "`", "x``y.dll", "``"))
def test_dumpkit_code_spans_render_as_code_and_dump_names_stay_inert(name):
    """Verdict sentences are dumpkit's, with `code` spans of its own, but they embed dump
    names: a name may shift or spoil the spans, never become markup."""
    from dumpkit.report.escape import html_prose, markdown_prose

    sentence = f"The call in {name} failed; run `dumpkit explain 0xC0000409/7` next."
    for rendered in (_markdown_to_html(markdown_prose(sentence)), html_prose(sentence)):
        low = rendered.lower()
        assert "<script" not in low and "<b>" not in low and "href=" not in low and "<img" not in low
        assert "details>" not in low and "\x1b" not in rendered
        if name.count("`") % 2 == 0:  # the sentence's own span still pairs up
            assert "<code>dumpkit explain 0xC0000409/7</code>" in rendered
        else:  # an odd name: no span can be trusted, the backticks show as text
            assert "<code>" not in rendered and "`dumpkit explain 0xC0000409/7`" in rendered
    # In a table cell a `|` inside a span must not split the row.
    cell = markdown_prose("use `a|b` here", table_cell=True)
    table = _markdown_to_html("| k | v |\n|---|---|\n| x | " + cell + " |\n")
    assert table.count("<td>") == 2 and "<code>a|b</code>" in table


def test_escaped_markdown_renders_as_the_same_plain_text():
    """Whatever the characters, escaped text renders as itself: no emphasis, link, image,
    code, strikethrough or HTML (deterministic random strings over markup characters,
    plus names with underscores, which stay unescaped between letters for readability)."""
    import html as html_lib
    import random

    from dumpkit.report.escape import WORD_JOINER, markdown

    rng = random.Random(4)
    alphabet = "ab1_*`[]()!<>#|~&\\ é-.:/"
    samples = ["STATUS_STACK_OVERFLOW", "__fastfail", "a_b_", "_x_", "x__y__z", "é_é_", "![i](u)", "<b>", "a>b"]
    samples += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 14))) for _ in range(400)]
    for s in samples:
        rendered = _markdown_to_html("- x " + markdown(s) + " y\n")
        inner = re.fullmatch(r"<ul>\n<li>x (.*) y</li>\n</ul>\n", rendered, re.S)
        assert inner is not None, (s, rendered)
        shown = html_lib.unescape(inner[1])
        # the one addition: an invisible word joiner after '#' or '@', so that `#123` and
        # `@user` cannot link or mention on GitHub (issue #16 item 5)
        assert all(shown[i - 1] in "#@" for i, ch in enumerate(shown) if ch == WORD_JOINER), (s, rendered)
        shown = shown.replace(WORD_JOINER, "")
        assert shown == s.strip() or shown == s, (s, rendered)
        assert "<" not in inner[1], (s, rendered)
