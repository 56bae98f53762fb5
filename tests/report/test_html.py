"""The HTML format: the document (golden, with plotly's bundle and chart data left out), its
charts as plotly figures, escaping, the install hint without plotly, and a real browser; the
same for ``gradcheck compare --format html`` on the committed pair ``sample_pairs/summed_loss``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from gradcheck._optional import MissingDependencyError
from gradcheck.model import Comparison, Report, RunReport
from gradcheck.report.compare_html import ComparisonHtmlFormatter
from gradcheck.report.html import HtmlFormatter, escape
from gradcheck.report.layers import layer_view
from tests.support import browser
from tests.support.golden import check_golden
from tests.support.handmade import HOSTILE_RUN, hostile_report, sample_report, spiky_report
from tests.support.paths import REPO

plotly = pytest.importorskip("plotly")
from gradcheck.report import html_charts  # noqa: E402 - needs plotly

PAIR = ("sample_pairs/summed_loss/fit/train", "sample_pairs/summed_loss/loop")
CHART_SCRIPT = re.compile(r"<script[^>]*>\s*window\.PLOTLYENV.*?</script>", re.S)
URL_ATTRIBUTE = re.compile(r"""\b(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.I)


def without_plotly(text: str) -> str:
    """The document with plotly.js and each chart's data replaced by placeholders."""
    bundle = plotly.offline.get_plotlyjs()
    assert text.count(bundle) == 1  # inlined, once
    text = text.replace(bundle, "/* plotly.js */")
    return CHART_SCRIPT.sub("<script>/* chart */</script>", text)


def test_html_golden() -> None:
    check_golden("report.html", without_plotly(HtmlFormatter().format(sample_report())))


def summed_loss(monkeypatch: pytest.MonkeyPatch) -> Comparison:
    """``gradcheck compare`` of the committed pair (B sums its loss over batches of 32), run
    from the repository so that the document names the runs by relative paths."""
    from gradcheck.compare.runs import compare_runs
    from gradcheck.pipeline import load_runs

    monkeypatch.chdir(REPO)
    return compare_runs(*load_runs(list(PAIR)))


def test_comparison_html_golden(monkeypatch: pytest.MonkeyPatch) -> None:
    text = ComparisonHtmlFormatter().format(summed_loss(monkeypatch))
    assert len(re.findall(r'<div id="chart-\d+"', text)) == 4  # every parameter diverges
    assert text.count("<tr>") == 1 + 4
    check_golden("comparison.html", without_plotly(text))


def test_comparison_chart_overlays_both_runs_at_the_common_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kernel = summed_loss(monkeypatch).parameters[0]
    figure = html_charts.comparison_figure(kernel, str)
    assert figure is not None and figure["layout"]["yaxis"]["type"] == "log"
    norm_a, norm_b, move_a, move_b = figure["data"]
    assert [t["name"] for t in figure["data"]] == [
        "A: gradient L2 norm",
        "B: gradient L2 norm",
        "A: weight movement per step",
        "B: weight movement per step",
    ]
    assert norm_a["x"] == norm_b["x"] == list(range(12))  # the common steps 0-11
    assert move_a["x"] == move_b["x"] == list(range(1, 12))  # per interval, at its end
    assert norm_b["y"][0] / norm_a["y"][0] == pytest.approx(kernel.grad_norm_ratio_first)
    assert kernel.grad_norm_ratio_first == pytest.approx(32, rel=0.05)  # the batch of 32
    assert {move_a["yaxis"], move_b["yaxis"]} == {"y2"}
    assert [shape["x0"] for shape in figure["layout"]["shapes"]] == [0]  # they part at once


def test_html_is_self_contained() -> None:
    text = HtmlFormatter().format(sample_report())
    assert len(text.encode()) < 6_000_000  # plotly.js (4.8 MB) once, plus the report
    assert not URL_ATTRIBUTE.search(without_plotly(text))
    # plotly's bundle names URLs (map tiles, MathJax) that only map and LaTeX charts load
    assert not re.search(r"<(?:script|link|img|iframe)[^>]+(?:src|href)=", without_plotly(text))


def test_html_opens_on_an_overview_of_every_run_linked_to_its_section() -> None:
    text = HtmlFormatter().format(sample_report())
    overview = text.index('<h2 id="overview">2 runs under <code>runs/</code></h2>')
    assert overview < text.index('<section id="run-1">') < text.index('<section id="run-2">')
    table = text[overview : text.index("</table>", overview)]
    assert table.index('href="#run-1"><code>troubled') < table.index('href="#run-2"><code>healthy')
    assert '<span class="nan">1 nan</span> · <span class="exploding">1 exploding</span>' in table
    assert '<span class="nan">nan</span> <code>fc1 (weight)</code>' in table  # worst finding
    assert '<td class="num" data-value="24.0">24</td>' in table  # and its onset


def test_html_draws_a_chart_per_finding_group_and_lists_frozen_parameters() -> None:
    text = HtmlFormatter().format(sample_report())
    troubled = text[text.index('<section id="run-1">') : text.index('<section id="run-2">')]
    # the heatmap, nan, exploding and vanishing groups, the global norm (the run went NaN);
    # bn1 is static: a list, not a flat line
    assert len(re.findall(r'<div id="chart-\d+"', troubled)) == 5
    assert "<h3>Weights that never moved (1)</h3>\n<ul><li><code>bn1</code> (weight): " in troubled
    # layer rows (a heading and 4), cause and fix per verdict (4), every parameter (folded: 1 + 6)
    assert troubled.count("<tr>") == 1 + 4 + 4 + 1 + 6


def many_nan_parameters() -> RunReport:
    """Twelve NaN parameters in six layers, all from step 24: one group, one chart."""
    from dataclasses import replace

    from tests.support.handmade import layer, rising_then_nan

    layers = tuple(
        layer(
            f"block/dense_{i // 2}/{('kernel', 'bias')[i % 2]}",
            "nan",
            severity=5.0,
            first_bad_step=24,
            depth=i,
            trend=rising_then_nan(),
        )  # fmt: skip
        for i in range(12)
    )
    return replace(sample_report().runs[1], run="runs/nan", layers=layers)


def test_one_chart_for_a_group_not_one_per_parameter() -> None:
    report = Report(version="0", runs=(many_nan_parameters(),))
    text = HtmlFormatter().format(report)
    assert len(re.findall(r'<div id="chart-\d+"', text)) == 2  # the heatmap and the group
    assert "<code>dense_0 … dense_5</code> (kernel, bias), from step 24</h3>" in text
    figure = html_charts.group_figure(layer_view(many_nan_parameters()).rows[0], str)
    assert figure is not None
    lines = [t for t in figure["data"] if t["mode"] == "lines" and "dash" not in str(t)]
    assert len(lines) == html_charts.MAX_GROUP_LINES  # the most severe; the table has them all


def test_finding_chart_marks_thresholds_onset_and_nonfinite_steps() -> None:
    nan_layer, exploding = sample_report().runs[0].layers[:2]
    figure = html_charts.finding_figure(exploding, str)
    assert figure is not None and figure["layout"]["yaxis"]["type"] == "log"
    levels = {t["name"]: t["y"] for t in figure["data"] if t["name"] != "gradient L2 norm"}
    assert levels == {"early baseline": [1.0, 1.0], "threshold": [100.0, 100.0]}
    assert [shape["x0"] for shape in figure["layout"]["shapes"]] == [12]  # the onset
    nan_figure = html_charts.finding_figure(nan_layer, str)
    assert nan_figure is not None
    line, crosses = nan_figure["data"]
    assert crosses["x"] == list(range(24, 32))  # every NaN step marked
    assert line["y"][24:] == [None] * 8 and line["y"][0] == pytest.approx(0.1)
    assert crosses["y"][0] == pytest.approx(2 * 0.1 * 10 ** (23 / 4))


def test_finding_chart_puts_the_update_size_under_the_norm() -> None:
    from dataclasses import replace

    from tests.support.handmade import step_series

    layer = sample_report().runs[0].layers[1]
    update = step_series("weight norm change per step (relative)", (0.0, 0.0, 0.0, 1e-3))
    figure = html_charts.finding_figure(replace(layer, update_series=update), str)
    assert figure is not None
    assert figure["data"][-1]["yaxis"] == "y2" and figure["data"][-1]["y"][-1] == 1e-3
    assert figure["layout"]["yaxis2"]["type"] == "linear"  # mostly zeros: no log axis
    assert figure["layout"]["xaxis"]["anchor"] == "y2"


def test_heatmap_has_a_column_per_logged_step_and_marks_nan_and_zero_cells() -> None:
    from dataclasses import replace

    from gradcheck.model import StepSeries

    run = sample_report().runs[0]
    sparse = np.array([0, 10, 500, 501, 9000], dtype=np.int64)  # logged far apart
    values = np.array([1.0, 0.0, 1e-3, np.nan, 2.0])
    series = StepSeries("gradient L2 norm", sparse, values, np.array([501], dtype=np.int64))
    layers = (replace(run.layers[1], series=series),)
    figure = html_charts.layer_heatmap(replace(run, layers=layers), str)
    assert figure is not None
    norms, zeros, bad = figure["data"]
    assert norms["x"] == ["0", "10", "500", "501", "9000"]  # logged steps, no gaps between
    assert figure["layout"]["xaxis"]["type"] == "category"
    assert norms["y"] == ["fc2"]  # the layer (its parameters combined)
    assert norms["z"] == [[0.0, None, -3.0, None, pytest.approx(np.log10(2.0))]]
    assert zeros["z"] == [[None, 1, None, None, None]]  # exactly zero: grey, not a cliff
    assert bad["z"] == [[None, None, None, 1, None]]  # NaN/Inf: red
    assert bad["colorscale"][0][1] == html_charts.NONFINITE_COLOR


def test_heatmap_combines_a_layers_parameters_and_groups_long_logs_into_runs_of_steps() -> None:
    from dataclasses import replace

    from tests.support.handmade import step_series

    run = sample_report().runs[0]
    steps = 3 * html_charts.MAX_COLUMNS
    kernel = replace(run.layers[1], name="fc2.weight", series=step_series("gradient L2 norm",
                     (3.0,) * steps))  # fmt: skip
    bias = replace(run.layers[1], name="fc2.bias", series=step_series("gradient L2 norm",
                   (4.0,) * steps))  # fmt: skip
    figure = html_charts.layer_heatmap(replace(run, layers=(kernel, bias)), str)
    assert figure is not None
    norms = figure["data"][0]
    assert len(norms["x"]) == html_charts.MAX_COLUMNS and norms["x"][0] == "0–2"
    assert norms["z"][0][0] == pytest.approx(np.log10(5.0))  # sqrt(3^2 + 4^2)


def test_html_escapes_hostile_names_in_markup_and_charts() -> None:
    text = without_plotly(HtmlFormatter().format(hostile_report()))
    assert "<script>console" not in text and "<img" not in text
    assert "&lt;script&gt;console.log(&#x27;INJECTED&#x27;)&lt;/script&gt;" in text
    assert "runs/&quot;&gt;&lt;img src=x onerror=" in text
    figure = html_charts.layer_heatmap(hostile_report().runs[0], escape)
    assert figure is not None and "<" not in "".join(figure["data"][0]["y"])


def test_html_without_plotly_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "plotly", None)  # import plotly now raises ImportError
    with pytest.raises(
        MissingDependencyError, match=r"pip install plotly \(gradcheck's html extra\)"
    ):
        HtmlFormatter().format(sample_report())
    comparison = summed_loss(monkeypatch)
    with pytest.raises(
        MissingDependencyError, match=r"pip install plotly \(gradcheck's html extra\)"
    ):
        ComparisonHtmlFormatter().format(comparison)


# --- in a browser ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sample", "hostile", "comparison"])
def test_html_renders_in_chromium(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    browser.chromium()  # skips without one
    if name == "comparison":
        text = ComparisonHtmlFormatter().format(summed_loss(monkeypatch))
    else:
        text = HtmlFormatter().format(sample_report() if name == "sample" else hostile_report())
    page = tmp_path / f"{name}.html"
    page.write_text(text, encoding="utf-8")
    charts = page.read_text(encoding="utf-8").count("Plotly.newPlot(")
    rendered = browser.render(page, tmp_path)
    assert rendered.console == []  # no error, no uncaught exception, and no injected script
    assert charts >= 2
    assert rendered.dom.count('class="plot-container plotly"') == charts
    assert rendered.dom.count('class="main-svg"') >= charts  # each chart drew its SVG
    assert "INJECTED" not in rendered.console and "<img src=" not in rendered.dom
    if name == "hostile":
        assert HOSTILE_RUN not in rendered.dom  # it is there as text, so serialised escaped
        assert "console.log('INJECTED')" in rendered.dom.replace("&lt;", "<").replace("&gt;", ">")
        assert "<script>console.log('INJECTED')" not in rendered.dom  # not an element
    widths = browser.widths_at(page, tmp_path)  # on a phone
    assert widths.viewport < browser.PHONE_WIDTH and widths.document <= widths.viewport
    assert 0.8 * widths.viewport < widths.charts <= widths.viewport  # as wide as the page
    shot = browser.screenshot(page, tmp_path / f"{name}.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_the_browser_check_sees_console_errors(tmp_path: Path) -> None:
    """The console check can fail: a page that logs an error and throws is caught."""
    browser.chromium()
    page = tmp_path / "broken.html"
    page.write_text("<script>console.error('boom'); undefinedFunction();</script>")
    console = browser.render(page, tmp_path).console
    assert len(console) == 2 and '"boom"' in console[0] and "undefinedFunction" in console[1]


def test_finding_chart_marks_each_flags_onset() -> None:
    from dataclasses import replace

    layer = replace(sample_report().runs[0].layers[0], onsets={"nan": 24, "exploding": 9})
    figure = html_charts.finding_figure(layer, str)
    assert figure is not None
    assert [shape["x0"] for shape in figure["layout"]["shapes"]] == [24, 9]
    texts = [note["text"] for note in figure["layout"]["annotations"]]
    assert texts == ["nan from 24", "exploding from 9"]


def test_a_reader_sees_the_overview_first_and_the_heatmaps_nan_cells_in_red(
    tmp_path: Path,
) -> None:
    """At 1400 px: the overview table is on the first screen, above every run; in the NaN
    run's heatmap, its NaN cells are drawn red (the screenshot's pixels, not the DOM's)."""
    browser.chromium()
    page = tmp_path / "report.html"
    page.write_text(HtmlFormatter().format(sample_report()), encoding="utf-8")
    selectors = ["#overview", "#overview + div table", "#run-1", "#run-1 .js-plotly-plot"]
    boxes, widths = browser.boxes_at(page, tmp_path, selectors)
    overview, table, section, heatmap = (boxes[selector] for selector in selectors)
    assert overview and table and section and heatmap
    assert overview.top < table.bottom < section.top and table.bottom < 900  # the first screen
    assert widths.document <= widths.viewport  # nothing cut off at 1400 px
    shot = browser.screenshot(page, tmp_path / "report.png", width=browser.WINDOW_WIDTH,
                              height=heatmap.bottom + 20)  # fmt: skip
    red = tuple(int(html_charts.NONFINITE_COLOR[i : i + 2], 16) for i in (1, 3, 5))
    # fc1's 8 NaN steps of 32, one of 4 layers with gradients: ~6% of the plotting area
    assert browser.share_of_colour(shot, heatmap, red) > 0.02  # type: ignore[arg-type]
    healthy = browser.boxes_at(page, tmp_path, ["#run-2 .js-plotly-plot"])[0]
    box = healthy["#run-2 .js-plotly-plot"]
    assert box is not None
    shot = browser.screenshot(page, tmp_path / "healthy.png", width=browser.WINDOW_WIDTH,
                              height=box.bottom + 20)  # fmt: skip
    assert browser.share_of_colour(shot, box, red) == 0  # type: ignore[arg-type]


def test_comparison_fits_a_1400_px_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The "parts at step" column was cut off at 1400 px."""
    browser.chromium()
    page = tmp_path / "comparison.html"
    page.write_text(ComparisonHtmlFormatter().format(summed_loss(monkeypatch)), encoding="utf-8")
    boxes, widths = browser.boxes_at(page, tmp_path, ["table th:last-child"])
    last = boxes["table th:last-child"]
    assert last is not None and last.left + last.width <= widths.viewport
    assert widths.document <= widths.viewport


def test_the_loss_chart_marks_each_spike_with_its_leader() -> None:
    """Issue 35: the training loss is drawn per run, each transient spike a dotted line
    labelled with its size and the parameter that led it."""
    text = HtmlFormatter().format(spiky_report())
    assert (
        "<h3>Training loss: 2 loss spikes (steps 152, 304), led by lm_head.weight (152); " in text
    )
    assert "spike 8.25x, led by lm_head.weight" in text
    assert "spike 4.5x, led by no gradient leader" in text
    assert text.count('"dash":"dot"') >= 2 or text.count('"dash": "dot"') >= 2
