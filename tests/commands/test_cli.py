"""The command line as a user meets it: verdicts on the sample dumps, formats, exit codes,
one-line errors, and that the dump is never written."""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.support.samples import (
    REAL_DUMPS,
    run_cli,
    SAMPLE_BIN,
    SAMPLES,
    real_dump,
    real_dumps,
    sample_facts,
    sample_manifest,
)
from tests.support.schema import problems as schema_problems

pytestmark = pytest.mark.slow  # the full run's (CI's); `-m "not slow"` leaves it out

# Every sample the manifest records, the .xz ones included (decompressed once per session).
CASES = [d for d in sample_manifest() if d["file"].endswith((".dmp", ".dmp.xz"))]


run = run_cli


@pytest.fixture(scope="session")
def sample(tmp_path_factory):
    """The path of a sample dump by its manifest name; `NAME.dmp.xz` is decompressed."""
    unpacked = tmp_path_factory.mktemp("xz")

    def path(name: str) -> Path:
        src = SAMPLES / name
        if not src.exists():
            pytest.skip(f"sample dump {name} not present")
        if not name.endswith(".xz"):
            return src
        out = unpacked / name[:-3]
        if not out.exists():
            with lzma.open(src) as fin, open(out, "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
        return out

    return path


_REPORTS = {}


def analyze(path: Path, fmt: str = "json") -> str:
    """`dumpkit analyze PATH --image-path sample_dumps/bin --format FMT`, run once per session."""
    key = (str(path), fmt)
    if key not in _REPORTS:
        args = ["analyze", path, "--image-path", SAMPLE_BIN, "--format", fmt]
        if fmt == "text":
            args.append("--no-color")
        r = run(*args)
        assert r.returncode == 0, r.stderr
        _REPORTS[key] = r.stdout
    return _REPORTS[key]


def analyze_json(name, sample=None):
    return json.loads(analyze(sample(name) if sample else SAMPLES / name))


def expected_raiser(case) -> str:
    """The function a fail-fast must be attributed to, from the manifest: for /GS
    (subcode 2) the caller of the failure reporter, whose cookie was smashed; otherwise
    the function that executed `__fastfail` (the one at the exception address)."""
    if case["fastfail_subcode"] == 2:
        return case["call_chain"][1]["function"]
    return case["fault_function"]


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_every_sample_gets_the_verdict_its_manifest_records(case, sample):
    doc = analyze_json(case["file"], sample)
    v = doc["verdict"]
    assert v["kind"] == case["expected_class"], v["headline"]
    assert doc["crash"]["code"] == case["exception_code"]
    assert doc["crash"]["thread_id"] == case["crash_thread_tid"]
    crash_thread = doc["threads"][0]
    assert crash_thread["is_crashing"] and crash_thread["tid"] == case["crash_thread_tid"]
    assert crash_thread["frame_count"] == case["total_frames"]
    if case["expected_class"] == "recursion":
        cyc = crash_thread["cycles"][0]
        names = [f.split("!", 1)[1] for f in cyc["functions"]]
        assert sorted(names) == sorted(case["cycle_functions"])
        assert cyc["period"] == case["cycle_period"]
        assert abs(cyc["repetitions"] - case["cycle_repetitions"]) <= 1
        assert cyc["bytes_per_repetition"] == case["cycle_bytes_per_repetition"]
        # The headline names the members in call order, starting where the cycle was entered.
        order = " -> ".join(f"{case['rip_module']}!{fn}" for fn in case["cycle_functions_call_order"])
        assert order in v["headline"]
        assert f"{case['cycle_repetitions']:,}" in v["headline"] or f"{cyc['repetitions']:,}" in v["headline"]
    if case["expected_class"] == "oversized_frame":
        top = doc["frame_sizes"][0]
        assert top["function"].endswith("!" + case["oversized_function"])
        assert top["requested"] == case["oversized_bytes"] and top["not_yet_allocated"]
        assert case["oversized_function"] in v["headline"]
    if case["expected_class"] in ("fastfail", "abort"):  # abort(): a fail-fast with subcode 7
        assert doc["crash"]["fastfail_code"] == case["fastfail_subcode"]
        assert v["headline"].startswith("Fail-fast FAST_FAIL_")
        # The raising function is the kernel that called __fastfail (or, for /GS, the
        # function whose cookie was smashed), named from the image.
        assert doc["crash"]["raised_by"] == f"{case['rip_module']}!{expected_raiser(case)}"
    if case["expected_class"] == "access_violation":
        assert doc["crash"]["access_kind"] == ("write" if case["exception_parameters"][0] == 1 else "read")
        assert doc["crash"]["access_address"] == f"{case['exception_parameters'][1]:#x}"
        assert case["fault_function"] in v["headline"]
    if case["expected_class"] == "illegal_instruction":
        assert "ud2" in v["headline"]


def visible_text(html_doc: str) -> str:
    """What a reader sees of an HTML page: tags dropped, entities decoded, spaces collapsed."""
    import html

    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", html_doc)).split())


def markdown_as_html(md: str) -> str:
    """Markdown rendered the way GitHub does (CommonMark + tables)."""
    from markdown_it import MarkdownIt  # rich depends on it

    return MarkdownIt("commonmark").enable("table").render(md)


def test_text_markdown_and_html_carry_the_same_verdict(tmp_path):
    case = next(c for c in CASES if c["file"] == "recursion_cycle3.dmp")
    dump = SAMPLES / case["file"]
    headline = analyze_json(case["file"])["verdict"]["headline"]
    # The headline states the manifest's numbers...
    assert f"{case['cycle_repetitions']:,} repetitions" in headline
    assert f"{case['cycle_bytes_per_repetition']:,} bytes" in headline
    # ...and every format shows that same headline.
    text = analyze(dump, "text")
    assert "VERDICT" in text and headline in " ".join(text.split())
    assert "opkernels.dll!visit" in text and "repeats" in text  # cycle folded
    md = tmp_path / "r.md"
    r = run("analyze", dump, "--image-path", SAMPLE_BIN, "--format", "markdown", "--output", md)
    assert r.returncode == 0 and r.stdout == ""
    body = md.read_text()
    assert "<details>" in body and f"Crashing thread {case['crash_thread_tid']}" in body
    assert headline in visible_text(markdown_as_html(body))
    page = analyze(dump, "html")
    assert page.startswith("<!DOCTYPE html>") and "</html>" in page
    assert headline in visible_text(page)


@pytest.mark.parametrize("name", ["fastfail_gs.dmp", "gp_wild_pointer.dmp", "illegal_instruction.dmp"])
def test_commands_and_instructions_in_the_verdict_render_as_inline_code(name):
    """The verdict's `...` spans (commands to run, the faulting instruction) are code in
    Markdown and HTML, not backslash-escaped backticks."""
    import html

    v = analyze_json(name)["verdict"]
    spans = [s for text in (v["headline"], *v["evidence"], *v["next_steps"]) for s in re.findall(r"`([^`]+)`", text)]
    assert spans, v  # these verdicts carry at least one command or instruction
    md = analyze(SAMPLES / name, "markdown")
    assert "\\`" not in md
    for page in (markdown_as_html(md), analyze(SAMPLES / name, "html")):
        page = page.replace("&quot;", '"').replace("&#x27;", "'")
        for span in spans:
            assert f"<code>{html.escape(span, quote=False)}</code>" in page, span


def stack_groups_from_json(doc):
    """Non-crashing threads grouped by `same_stack_as`: sorted tuples of thread ids."""
    groups = set()
    for t in doc["threads"]:
        if not t["is_crashing"]:
            groups.add(tuple(sorted([t["tid"], *t["same_stack_as"]])))
    return groups


@pytest.mark.parametrize("name", ["recursion_cycle3.dmp", "fastfail_abort.dmp"])
def test_threads_with_identical_stacks_are_shown_once_in_markdown_and_html(name):
    groups = stack_groups_from_json(analyze_json(name))
    shared = [g for g in groups if len(g) > 1]
    assert shared  # idle workers parked in the same wait
    md = analyze(SAMPLES / name, "markdown")
    others = md[md.index("Other threads") :]
    assert others.count("```") == 2 * len(groups)  # one stack block per distinct stack
    page = analyze(SAMPLES / name, "html")
    assert page.count("<details><summary>Thread") == len(groups)
    for g in shared:
        listed = ", ".join(map(str, g))
        assert f"Threads {listed} (identical stacks" in md and f"Threads {listed} (identical stacks" in page
        for tid in g:
            assert f"Thread {tid}:" not in md and f"Thread {tid} (" not in page


@pytest.mark.parametrize("name", ["recursion_cycle3.dmp", "tree_free.dmp"])
def test_every_format_shows_where_the_recursion_was_entered_from(name):
    case = next(c for c in CASES if c["file"] == name)
    below = [
        f"{c['module']}!{c['function']}" for c in case["call_chain"] if c["function"] not in case["cycle_functions"]
    ]
    path = " <- ".join(below)
    assert f"entered from: {path}" in " ".join(analyze(SAMPLES / name, "text").split())
    assert f"Entered from: {path}" in visible_text(markdown_as_html(analyze(SAMPLES / name, "markdown")))
    assert f"entered from: {path}" in visible_text(analyze(SAMPLES / name, "html"))


def _largest_frame_rows(report_text: str, report_format: str):
    """{frame index: row} of the 'Largest frames' table in a text or Markdown report."""
    rows = {}
    for line in report_text[report_text.index("Largest frames") :].splitlines()[1:]:
        if "oversized:" in line or (rows and not line.strip()):
            break  # the legend, or the blank line, after the table
        first = line.strip("| ").split("|" if report_format == "markdown" else None)[:1]
        if first and first[0].strip().isdigit():
            rows[int(first[0])] = line
    return rows


@pytest.mark.parametrize("name,threshold", [("big_frame.dmp", None), ("recursion_cycle3.dmp", 200)])
def test_oversized_frames_are_marked_in_every_format(name, threshold):
    """The JSON `oversized` flag is visible where people look: the largest-frames table of
    the text, Markdown and HTML reports, with a legend that names the threshold."""
    extra = ["--threshold", threshold] if threshold else []
    out = {}
    for fmt in ("json", "text", "markdown", "html"):
        r = run("analyze", SAMPLES / name, "--image-path", SAMPLE_BIN, "--format", fmt, "--no-color", *extra)
        assert r.returncode == 0, r.stderr
        out[fmt] = r.stdout
    sizes = json.loads(out["json"])["frame_sizes"][:8]
    flagged = {fs["frame_index"] for fs in sizes if fs["oversized"]}
    assert flagged and flagged != {fs["frame_index"] for fs in sizes}  # some marked, not all
    for fmt, marker in (("text", "oversized"), ("markdown", "**oversized**")):
        rows = _largest_frame_rows(out[fmt], fmt)
        assert set(rows) == {fs["frame_index"] for fs in sizes}, fmt
        assert {i for i, row in rows.items() if marker in row} == flagged, fmt
        assert "oversized: the frame, or what its prologue asks for, is at least" in " ".join(out[fmt].split())
    assert out["html"].count('<td class="flag">oversized</td>') == len(flagged)
    for fmt in ("text", "markdown", "html"):
        assert "--threshold" in out[fmt]


REAL = real_dumps()


# docs/report-schema.json against what `dumpkit analyze` prints; tests/report checks the
# schema against the other commands' documents and docs/report-schema.md against the schema.
@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_a_sample_report_is_valid_under_the_schema(case, sample):
    problems = schema_problems(analyze_json(case["file"], sample), "analyze")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("dump", REAL, ids=[str(p.relative_to(REAL_DUMPS)) for p in REAL])
def test_a_real_dump_report_is_valid_under_the_schema(dump):
    r = run("analyze", dump, "--format", "json")
    if r.returncode == 2:
        pytest.skip(f"unusable input: {r.stderr.strip()}")
    assert r.returncode in (0, 1), r.stderr
    problems = schema_problems(json.loads(r.stdout), "analyze")
    assert not problems, "\n".join(problems)


def test_counts_of_one_are_singular(sample):
    """The self-written dump has a thread with a single frame and a one-function cycle."""
    path = sample("recursion_one.selfdump.dmp.xz")
    doc = json.loads(analyze(path))
    single = [t["tid"] for t in doc["threads"] if t["frame_count"] == 1]
    assert single and doc["threads"][0]["cycles"][0]["period"] == 1
    text = analyze(path, "text")
    assert f"  {single[0]}: 1 frame, top " in text
    wrong = re.compile(r"(?<![\d,])1 (frames|functions|processors|repetitions|more times)\b")
    for fmt in ("text", "markdown", "html"):
        out = analyze(path, fmt)
        assert not wrong.search(out), (fmt, wrong.search(out))
        assert "cycle of 1 function in call order" in out, fmt


@pytest.mark.parametrize("name", ["recursion_cycle3.dmp", "null_deref.dmp"])
def test_every_format_states_the_stack_budget_the_same_way(name):
    b = analyze_json(name)["threads"][0]["budget"]
    share = f"({b['used'] / b['reserve_size']:.0%}), from {b['source']}"
    estimate = "of ~" if b["source"] == "captured+image" else "of "
    pages = {
        "text": " ".join(analyze(SAMPLES / name, "text").split()),
        "markdown": visible_text(markdown_as_html(analyze(SAMPLES / name, "markdown"))),
        "html": visible_text(analyze(SAMPLES / name, "html")),
    }
    for fmt, page in pages.items():
        found = re.search(r"Stack ?:? used .{0,200}", page)
        assert found, fmt
        assert share in found[0] and estimate in found[0][:40], (fmt, found[0])


def test_every_format_shows_the_environment_sentences_and_caveats():
    """Compatibility sentences and caveats (e.g. 'ran under Wine') reach every reader,
    one sentence per item in Markdown rather than one run-on paragraph."""
    env = analyze_json("tf_env_abort.dmp")["environment"]
    assert env["compatibility"] and env["notes"]
    md_html = markdown_as_html(analyze(SAMPLES / "tf_env_abort.dmp", "markdown"))
    pages = {
        "text": " ".join(analyze(SAMPLES / "tf_env_abort.dmp", "text").split()),
        "markdown": visible_text(md_html),
        "html": visible_text(analyze(SAMPLES / "tf_env_abort.dmp", "html")),
    }
    for fmt, page in pages.items():
        for sentence in env["compatibility"] + env["notes"]:
            assert sentence in page, (fmt, sentence)
    items = [visible_text(li) for li in re.findall(r"<li>(.*?)</li>", md_html, re.S)]
    for sentence in env["compatibility"]:
        assert sentence in items


def test_markdown_stack_columns_line_up_past_frame_9999(sample):
    """A pasted stack stays a readable table when frame numbers reach five digits."""
    md = analyze(sample("recursion_one.selfdump.dmp.xz"), "markdown")
    block = md[md.index("Crashing thread") :].split("```")[1].strip("\n").splitlines()
    header, rows = block[0], [ln for ln in block[1:] if re.match(r"\s*\d+ ", ln)]
    assert max(int(r.split()[0]) for r in rows) > 9999
    sp_column = header.index("Child-SP") + len("Child-SP") - 16
    assert all(re.fullmatch(r"[0-9a-f]{16}", r[sp_column : sp_column + 16]) for r in rows), rows


def test_text_report_numbers_frames_the_same_way_everywhere():
    """The evidence, the largest-frames table and the stack all say frame 5132, not 140c."""
    doc = analyze_json("recursion_cycle3.dmp")
    text = analyze(SAMPLES / "recursion_cycle3.dmp", "text")
    stack = text[text.index("Crashing thread") :]
    for fs in doc["frame_sizes"]:
        frame = next(f for f in doc["threads"][0]["frames"] if f["index"] == fs["frame_index"])
        row = next(ln for ln in stack.splitlines() if f"{frame['sp'][2:]:0>16}" in ln)
        assert row.split()[0] == str(fs["frame_index"]), row


def test_a_dump_without_exception_lists_its_threads_not_other_threads():
    dump = real_dump("breakpad/tiny-exe-with-cet-xsave.dmp")  # written on request: no exception
    doc = json.loads(analyze(dump))
    assert doc["crash"] is None and doc["verdict"]["kind"] == "no_exception"
    md, text = analyze(dump, "markdown"), analyze(dump, "text")
    assert "Other threads" not in md and f"<summary>Threads ({len(doc['threads'])})</summary>" in md
    assert "Other threads" not in text and "\nThreads\n" in text
    assert "dumpkit stack --all" in text


def test_a_32_bit_dump_shows_32_bit_addresses():
    dump = real_dump("breakpad/thread_name_list.dmp")
    doc = json.loads(analyze(dump))
    assert doc["system"]["arch"] == "x86"
    frame = doc["threads"][0]["frames"][0]
    sp, ip = (int(frame[k], 16) for k in ("sp", "ip"))
    row = f"{sp:08x} {ip:08x}"
    assert row in analyze(dump, "markdown")
    assert f"<td>{sp:08x}</td>" in analyze(dump, "html")
    assert re.search(rf"\b{sp:08x}\s+{ip:08x}\b", analyze(dump, "text"))
    assert f"{sp:016x}" not in analyze(dump, "markdown")


def test_stack_command_prints_kf_style_frames_and_image_sources():
    r = run("stack", SAMPLES / "fastfail_abort.dmp", "--image-path", SAMPLE_BIN)
    assert r.returncode == 0, r.stderr
    assert "check_failed_abort" in r.stdout and "Child-SP" in r.stdout
    assert "image-path" in r.stdout or "recorded-path" in r.stdout
    r = run("stack", SAMPLES / "fastfail_abort.dmp", "--all", "--json", "--image-path", SAMPLE_BIN)
    doc = json.loads(r.stdout)
    assert len(doc["threads"]) == 5
    r = run("stack", SAMPLES / "fastfail_abort.dmp", "--thread", "1")
    assert r.returncode == 2 and "no thread 1" in r.stderr


def test_stack_command_prints_addresses_as_wide_as_the_cpu():
    """kf shows a 32-bit process's addresses in 8 digits, an x64 one's in 16."""
    x86 = [
        p
        for p in REAL
        if (json.loads(run("info", p, "--json").stdout or "{}").get("system") or {}).get("arch") == "x86"
    ]
    if not x86:
        pytest.skip("no x86 dump in ../shared/real_dumps")
    sp_column = re.compile(r"^\s*00\s+\S+\s+([0-9a-f]+)\s", re.M)
    r = run("stack", x86[0])
    m = sp_column.search(r.stdout)
    assert m and len(m.group(1)) == 8, r.stdout[:400]
    r = run("stack", SAMPLES / "null_deref.dmp", "--image-path", SAMPLE_BIN)
    m = sp_column.search(r.stdout)
    assert m and len(m.group(1)) == 16, r.stdout[:400]


def test_info_lists_what_the_dump_holds():
    r = run("info", SAMPLES / "tf_env_abort.dmp", "--json")
    doc = json.loads(r.stdout)
    assert doc["crash"]["code"] == 0xC0000409
    assert doc["system"]["wine"].startswith("wine-8.0")
    assert any(m["name"] == "cudnn64_8.dll" for m in doc["modules"])
    assert any(s["name"] == "WineHostLibraries" and not s["known"] for s in doc["dump"]["stream_details"])
    r = run("info", SAMPLES / "tf_env_abort.dmp")
    assert r.returncode == 0 and "cudnn64_8.dll" in r.stdout


@pytest.mark.parametrize("spelling", ["-1073741571", "3221225725", "0xC00000FD", "C00000FD", "STATUS_STACK_OVERFLOW"])
def test_explain_accepts_every_spelling(spelling):
    r = run("explain", spelling)
    assert r.returncode == 0
    assert "STATUS_STACK_OVERFLOW" in r.stdout and "-1073741571" in r.stdout and "3221225725" in r.stdout


def test_explain_fastfail_subcode_and_bad_input():
    r = run("explain", "0xC0000409/7")
    assert r.returncode == 0 and "FAST_FAIL_FATAL_APP_EXIT" in r.stdout
    r = run("explain", "banana-split")
    assert r.returncode == 2 and r.stderr.startswith("dumpkit: error:") and r.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "content,needle", [(b"", "empty"), (b"MDMP", "too small"), (b"PK\x03\x04" + b"\0" * 60, "not a minidump")]
)
def test_bad_input_is_one_line_exit_2(tmp_path, content, needle):
    bad = tmp_path / "bad.dmp"
    bad.write_bytes(content)
    r = run("analyze", bad)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and str(bad) in r.stderr and needle in r.stderr


def test_missing_file_and_directory(tmp_path):
    r = run("analyze", tmp_path / "nope.dmp")
    assert r.returncode == 2 and "no such file" in r.stderr
    r = run("analyze", tmp_path)
    assert r.returncode == 2 and "directory" in r.stderr


def test_the_dump_is_never_written(tmp_path):
    dump = SAMPLES / "null_deref.dmp"
    before = hashlib.sha256(dump.read_bytes()).hexdigest()
    mtime = os.stat(dump).st_mtime_ns
    run("analyze", dump, "--image-path", SAMPLE_BIN, "--format", "json", "--output", tmp_path / "o.json")
    r = run("analyze", dump, "--output", dump)
    assert r.returncode == 2 and "refusing" in r.stderr
    assert hashlib.sha256(dump.read_bytes()).hexdigest() == before
    assert os.stat(dump).st_mtime_ns == mtime


def test_analyze_text_names_every_environment_component_in_full():
    """The summary labels are not cut: a user searching the report for "NVIDIA driver" finds it."""
    r = run("analyze", SAMPLES / "tf_env_abort.dmp", "--image-path", SAMPLE_BIN)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for label, value in [
        ("CUDA runtime", "11.2.152"),
        ("cuDNN", "8.1.0"),
        ("NVIDIA driver", "531.79"),
        ("TensorFlow", "2.10.0"),
        ("Python", "3.10.11"),
    ]:
        assert any(line.startswith(label + " ") and value in line for line in lines), label


def test_estimated_stack_reserve_is_marked_as_an_estimate():
    """Wine's Normal dumps hold no TEB: the reserve is the .exe's default, which a worker
    thread created with its own size does not have; the report must not state it as fact."""
    r = run("analyze", SAMPLES / "null_deref.dmp", "--image-path", SAMPLE_BIN)
    line = next(line for line in r.stdout.splitlines() if line.startswith("Stack "))
    assert "of ~2 MiB" in line and "captured+image" in line
    assert "executable's default" in r.stdout


@pytest.mark.parametrize("name", ["recursion_cycle3.dmp", "null_deref.dmp"])
def test_analyze_text_shows_frame_memory_in_decimal_and_stack_in_hex(name):
    """The analyze report's frame table and its frame-size lines agree (each row its own
    frame's bytes, decimal); `dumpkit stack` is kf: hex, row 00 blank, row 01 showing
    frame 0's size (the distance between their Child-SPs)."""
    top = sample_facts(name)["call_chain"][0]
    row = re.compile(r"^\s*0\s+([0-9a-f,]+)\s+[0-9a-f]{16}\s", re.M)
    r = run("analyze", SAMPLES / name, "--image-path", SAMPLE_BIN)
    m = row.search(r.stdout[r.stdout.index("Crashing thread") :])
    assert m and m.group(1) == f"{top['frame_bytes']:,}", r.stdout[-2000:]
    r = run("stack", SAMPLES / name, "--image-path", SAMPLE_BIN)
    assert re.search(r"^\s*00\s+[0-9a-f]{16}\s", r.stdout, re.M), r.stdout[:600]
    m = re.search(r"^\s*01\s+([0-9a-f]+)\s+[0-9a-f]{16}\s", r.stdout, re.M)
    assert m and m.group(1) == f"{top['frame_bytes']:x}", r.stdout[:600]


def test_explain_takes_words_without_quotes_and_points_at_the_capture_advice():
    r = run("explain", "stack", "overflow")
    assert r.returncode == 0 and r.stdout.startswith("0xC00000FD  STATUS_STACK_OVERFLOW")
    assert "reg add" not in r.stdout and "--how-to-capture" in r.stdout
    r = run("explain", "abort", "--how-to-capture")
    assert r.returncode == 0 and "FAST_FAIL_FATAL_APP_EXIT" in r.stdout and "reg add" in r.stdout


def test_explain_how_to_capture_alone_and_nothing_at_all():
    r = run("explain", "--how-to-capture")
    assert r.returncode == 0 and "DumpType" in r.stdout and "procdump" in r.stdout
    r = run("explain")
    assert r.returncode == 2 and r.stderr.startswith("dumpkit: error:") and r.stderr.count("\n") == 1


def test_explain_reads_a_dll_load_failure_pasted_from_a_chinese_windows():
    r = run("explain", "ImportError: DLL load failed while importing _pywrap_tensorflow_internal: 找不到指定的模块。")
    assert r.returncode == 0 and "ERROR_MOD_NOT_FOUND" in r.stdout and "os.add_dll_directory" in r.stdout
    r = run("explain", "ImportError: DLL load failed while importing x: 参数错误。")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "[WinError N]" in r.stderr


def test_explain_a_typo_names_the_nearest_code_in_one_line():
    r = run("explain", "STATUS_STACK_OVERFLOWW")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "did you mean STATUS_STACK_OVERFLOW?" in r.stderr
