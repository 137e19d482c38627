"""The benchmark's quick mode runs here; its memory figures are asserted exactly.

Bytes held by graphs are deterministic, so every figure is checked against what the model's
shapes say it must be. Timings are only reported (these machines are noisy), never asserted.
The committed full results are checked the same way, so the page shows consistent data.
"""

from __future__ import annotations

import csv
import json
import re
import sys

import pytest
import torch
from snippetcheck import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import retain_bench as rb  # noqa: E402

COMMITTED = ROOT / "benchmarks" / "results" / "retain_bench.json"
F32 = 4
CLASSES = 10


def expected_memory(size: dict) -> dict[str, tuple[int, int]]:
    """(peak, held after the step) in bytes for each strategy, from the shapes alone.

    One graph saves: each Tanh output (batch x width; the next Linear saves the same
    storage), head 1's output for the MSE loss, head 2's log-softmax for the cross
    entropy, and the cross entropy's 4-byte total weight. Parameters and inputs live
    anyway and are not counted.
    """
    b, w, d = size["batch"], size["width"], size["depth"]
    act = F32 * b * w
    head1 = F32 * b  # head 1's output, saved by mse_loss
    graph = d * act + head1 + F32 * b * CLASSES + F32
    head1_part = act + head1  # what head 1's nodes save: the trunk's output and its own
    trunk_and_head1 = d * act + head1
    return {
        "retain": (graph, head1_part),  # loss2.backward() frees all but head 1's nodes
        "recompute": (graph, 0),
        "summed": (graph, 0),
        "autograd_grad": (graph, head1_part),
        # the retained first graph (trunk + head 1) is still there during the second forward
        "article": (graph + trunk_and_head1, trunk_and_head1),
    }


def one_graph(size: dict) -> int:
    return expected_memory(size)["summed"][0]


def check_results(results: dict, quick: bool) -> None:
    assert results["mode"] == ("quick" if quick else "full")
    assert results["machine"]["torch"] == torch.__version__
    assert re.match(r"\d{4}-\d\d-\d\dT", results["date"])
    assert results["device"] == "cpu" or results["device"].startswith("cuda")
    rows = results["strategies"]
    assert len(rows) == len(results["sizes"]) * len(rb.STRATEGIES)
    assert len(results["sizes"]) >= 4
    assert len({s["width"] for s in results["sizes"]}) >= 2
    assert len({s["depth"] for s in results["sizes"]}) >= 2
    for row in rows:
        want = expected_memory(row)[row["strategy"]]
        assert (row["peak_bytes"], row["held_after_bytes"]) == want, row
        assert row["median_s"] > 0 and row["timed_runs"] >= 1
        if row["strategy"] == rb.BASELINE:
            assert row["ratio_to_summed"] == 1.0
        if results["device"] == "cpu":
            assert row["cuda_max_allocated_extra_bytes"] is None

    loop = results["forgotten_retain"]
    n, graph = loop["iterations"], one_graph(loop["size"])
    v = loop["variants"]
    assert v["correct"]["held_after_iteration_bytes"] == [0] * n
    assert v["correct"]["peak_in_iteration_bytes"] == [graph] * n
    # retain_graph=True keeps one graph until the next forward replaces `loss`: constant,
    # but two graphs at the peak from the second iteration on.
    assert v["retain"]["held_after_iteration_bytes"] == [graph] * n
    assert v["retain"]["peak_in_iteration_bytes"] == [graph] + [2 * graph] * (n - 1)
    assert v["retain"]["held_after_loss_dropped_bytes"] == 0
    # ... and keeping the loss tensor makes it grow by one whole graph per iteration.
    assert v["retain_keep_loss"]["held_after_iteration_bytes"] == [
        k * graph for k in range(1, n + 1)
    ]
    assert v["retain_keep_loss"]["held_after_loss_dropped_bytes"] == n * graph
    # Without retain_graph, a kept loss tensor holds no saved tensors at all.
    assert v["keep_loss"]["held_after_iteration_bytes"] == [0] * n

    bptt = results["truncated_bptt"]
    s = bptt["size"]
    per_step = F32 * s["batch"] * s["hidden"] * s["chunk"]  # tanh outputs of one chunk
    first = F32 * s["batch"] * s["hidden"] + F32 * s["chunk"] * s["batch"]  # h0, predictions
    held = bptt["not_detached_retain"]["held_after_step_bytes"]
    assert held == [first + per_step * (k + 1) for k in range(s["steps"])]
    assert bptt["detached"]["held_after_step_bytes"] == [0] * s["steps"]
    for name in ("not_detached_retain", "detached"):
        assert len(bptt[name]["seconds_per_step"]) == s["steps"]
    assert bptt["optimizer_step_error"].startswith(
        "one of the variables needed for gradient computation has been modified by an "
        "inplace operation"
    )


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("quick")
    results = rb.run(quick=True, log=lambda *_: None)
    paths = rb.write(results, out)
    return results, paths


def test_quick_mode_memory_is_exact(quick):
    results, _ = quick
    check_results(results, quick=True)
    # Timings are reported, never asserted.
    for row in results["strategies"]:
        print(f"{row['size']:15s} {row['strategy']:14s} {row['median_s'] * 1e3:8.3f} ms "
              f"x{row['ratio_to_summed']:.2f}")
    print(f"quick mode took {results['total_seconds']:.1f} s")


def test_results_are_written_as_json_and_csv(quick):
    results, (json_path, csv_path) = quick
    assert json.loads(json_path.read_text()) == json.loads(json.dumps(results))
    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(results["strategies"])
    for row, full in zip(rows, results["strategies"], strict=True):
        assert row["strategy"] == full["strategy"]
        assert int(row["peak_bytes"]) == full["peak_bytes"]


def test_cuda_memory_path_does_not_crash_on_cpu():
    calls = []
    assert rb.cuda_peak_extra_bytes(lambda: calls.append(1), torch.device("cpu")) is None
    assert calls == []
    row = rb.measure_memory("summed", rb.QUICK_SIZES[0], torch.device("cpu"))
    assert row["cuda_max_allocated_extra_bytes"] is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_cuda_memory_path_measures_on_cuda():
    row = rb.measure_memory("summed", rb.QUICK_SIZES[-1], torch.device("cuda"))
    assert row["cuda_max_allocated_extra_bytes"] > 0


def test_the_page_snippet_reproduces_the_benchmark():
    """snippets/benchmarks/memory_of_one_step.out shows what the benchmark measures."""
    out = (ROOT / "snippets" / "benchmarks" / "memory_of_one_step.out").read_text()
    shown = {
        m[1]: (int(m[2]), int(m[3]))
        for m in re.finditer(r"^(\w+)\s+peak\s+(\d+) B\s+held after the step\s+(\d+) B$",
                             out, flags=re.M)
    }
    assert set(shown) == set(rb.STRATEGIES)
    size = rb.Size("snippet", width=64, depth=6, batch=32)
    for name in rb.STRATEGIES:
        row = rb.measure_memory(name, size, torch.device("cpu"))
        assert (row["peak_bytes"], row["held_after_bytes"]) == shown[name], name


def test_committed_results_are_consistent():
    results = json.loads(COMMITTED.read_text(encoding="utf-8"))
    check_results(results, quick=False)
    largest = max(one_graph(s) for s in results["sizes"])
    assert largest >= 50_000_000, "the largest model saves at least 50 MB of activations"
    assert results["truncated_bptt"]["size"]["steps"] == 300
    csv_rows = list(csv.DictReader(COMMITTED.with_suffix(".csv").open()))
    assert [(r["size"], r["strategy"], int(r["peak_bytes"])) for r in csv_rows] == [
        (r["size"], r["strategy"], r["peak_bytes"]) for r in results["strategies"]
    ]


def test_bptt_without_detach_needs_retain_graph():
    """Why people add retain_graph=True there: the second step reaches the freed first graph."""
    model, xs, ys = rb.bptt_data(rb.QUICK_BPTT, torch.device("cpu"))
    h = torch.zeros(rb.QUICK_BPTT.batch, rb.QUICK_BPTT.hidden)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        for t in range(2):
            pred, h = model(xs[t], h)
            torch.nn.functional.mse_loss(pred, ys[t]).backward()


def median(values):
    return sorted(values)[len(values) // 2]


def test_committed_results_support_what_the_page_says():
    """The page's conclusions about time hold in the committed numbers (not asserted live)."""
    results = json.loads(COMMITTED.read_text(encoding="utf-8"))
    by_size: dict[str, dict[str, dict]] = {}
    for row in results["strategies"]:
        by_size.setdefault(row["size"], {})[row["strategy"]] = row
    for size, rows in by_size.items():
        fastest = min(rows.values(), key=lambda r: r["median_s"])
        assert fastest["strategy"] == "summed", size  # "the fastest at every size"
        assert rows["retain"]["median_s"] < rows["recompute"]["median_s"], size
        assert all(r["ratio_to_summed"] > 1 for n, r in rows.items() if n != "summed")
        # "the article's pattern was within 5 % of recomputing's at every size"
        assert abs(rows["article"]["median_s"] / rows["recompute"]["median_s"] - 1) < 0.05, size
    bptt = results["truncated_bptt"]
    grows = bptt["not_detached_retain"]["seconds_per_step"]
    flat = bptt["detached"]["seconds_per_step"]
    # "it grows with the step number": the last 30 steps are over 10x the first 30
    assert median(grows[-30:]) > 10 * median(grows[:30])
    # "the detached loop stays flat": within a factor 2 from start to end
    assert median(flat[-30:]) < 2 * median(flat[:30])
