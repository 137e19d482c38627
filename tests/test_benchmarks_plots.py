"""The page's figures and tables come from the committed results by one command.

The generator runs here on ``benchmarks/results/retain_bench.json``; the tables it writes
must be the ones committed (the page includes them), and the figures must need nothing at
read time: text drawn as paths, no links to other hosts.
"""

from __future__ import annotations

import os
import re
import sys
import warnings

import pytest
from snippetcheck import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import plot_retain_bench as plot  # noqa: E402

FIGURE_NAMES = ("strategies-time", "strategies-memory", "forgotten-retain", "truncated-bptt")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    if plot.find_cjk_font() is None:
        message = "no CJK font for the Chinese figures (Debian: apt-get install fonts-noto-cjk)"
        if os.environ.get("CI"):
            pytest.fail(message + "; .ci/run installs it")
        pytest.skip(message)
    figures = tmp_path_factory.mktemp("figures")
    tables = tmp_path_factory.mktemp("tables")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = plot.generate(plot.RESULTS, figures, tables)
    return figures, tables, written, caught


def test_generator_draws_every_glyph(generated):
    *_, caught = generated
    missing = [str(w.message) for w in caught if "missing from" in str(w.message).lower()]
    assert not missing, missing
    assert not caught, [str(w.message) for w in caught]


@pytest.mark.parametrize("lang", plot.LANGS)
@pytest.mark.parametrize("name", FIGURE_NAMES)
def test_figures_need_nothing_at_read_time(generated, name, lang):
    figures, *_ = generated
    svg = (figures / f"{name}.{lang}.svg").read_text(encoding="utf-8")
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
    assert "<text" not in svg, "text must be drawn as paths"
    assert "@font-face" not in svg
    hrefs = re.findall(r'(?:href|src)="([^"#][^"]*)"', svg)
    assert not hrefs, hrefs
    assert 'fill="#ffffff"' not in svg.split("<g id=\"axes_1\">")[0], "opaque background"


@pytest.mark.parametrize("lang", plot.LANGS)
@pytest.mark.parametrize("name", FIGURE_NAMES)
def test_committed_figures_exist(name, lang):
    assert (plot.FIGURES_DIR / f"{name}.{lang}.svg").exists()


def test_committed_tables_are_the_generated_ones(generated):
    _, tables, *_ = generated
    for name in plot.TABLES:
        for lang in plot.LANGS:
            fresh = (tables / f"{name}.{lang}.md").read_text(encoding="utf-8")
            committed = (plot.TABLES_DIR / f"{name}.{lang}.md").read_text(encoding="utf-8")
            assert fresh == committed, (
                f"{name}.{lang}.md is stale: run python benchmarks/plot_retain_bench.py"
            )


def test_committed_english_figures_are_the_generated_ones(generated):
    """English figures use matplotlib's bundled font, so they regenerate byte for byte."""
    figures, *_ = generated
    for name in FIGURE_NAMES:
        fresh = (figures / f"{name}.en.svg").read_text(encoding="utf-8")
        committed = (plot.FIGURES_DIR / f"{name}.en.svg").read_text(encoding="utf-8")
        assert fresh == committed, (
            f"{name}.en.svg is stale: run python benchmarks/plot_retain_bench.py"
        )
