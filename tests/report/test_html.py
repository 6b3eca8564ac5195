"""The HTML page: the same facts as the other formats, every dump string escaped."""

from __future__ import annotations

from dumpkit.analysis.model import Environment
from dumpkit.report.html import render_html
from tests.support.builders import frames, report, thread

TF_MODULE = r"C:\venv\Lib\site-packages\tensorflow\python\_pywrap_tensorflow_internal.pyd"


def test_tensorflow_row_when_its_modules_are_loaded_but_the_version_is_unknown():
    env = Environment(tensorflow=(TF_MODULE,))
    page = render_html(report([thread(1, frames(2), crashing=True)], environment=env))
    assert f"<tr><th>TensorFlow</th><td>version unknown ({TF_MODULE})</td></tr>" in page


def test_tensorflow_row_with_version_and_module():
    env = Environment(tensorflow=(TF_MODULE,), tensorflow_version="2.10.0")
    page = render_html(report([thread(1, frames(2), crashing=True)], environment=env))
    assert f"<tr><th>TensorFlow</th><td>2.10.0 ({TF_MODULE})</td></tr>" in page
