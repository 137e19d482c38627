"""Turn the results of ``retain_bench.py`` into the site's figures and tables.

    python benchmarks/plot_retain_bench.py

reads ``benchmarks/results/retain_bench.json`` and writes, for English and Chinese:

- ``docs/assets/benchmarks/<figure>.<lang>.svg``: the figures. Text is converted to paths,
  so the site needs no font at read time; backgrounds are transparent and every ink is a
  mid-tone, so one file reads on Material's light and dark themes.
- ``benchmarks/results/tables/<table>.<lang>.md``: the tables the page includes.

The Chinese figures need a CJK font (Debian: ``fonts-noto-cjk``); the script says so and
stops if there is none, rather than drawing empty boxes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import font_manager  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "retain_bench.json"
FIGURES_DIR = ROOT / "docs" / "assets" / "benchmarks"
TABLES_DIR = HERE / "results" / "tables"
LANGS = ("en", "zh")

CJK_FONT_FILES = (
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/google-noto-cjk/NotoSansCJK-Regular.ttc",
)
CJK_FAMILY = "Noto Sans CJK SC"

INK = "#8a8a8a"  # axes, ticks and text: mid-grey reads on white and on slate
GRID = "#8a8a8a40"
COLORS = {  # mid-luminance colours, distinguishable on both themes
    "retain": "#e8710a",
    "recompute": "#3b8fd9",
    "summed": "#2ea672",
    "autograd_grad": "#a06cd5",
    "article": "#d9455f",
}
HATCHES = {"retain": "", "recompute": "//", "summed": "", "autograd_grad": "..", "article": "xx"}

TEXT = {
    "en": {
        "strategy": {
            "retain": "retain + 2 backward",
            "recompute": "recompute",
            "summed": "summed backward",
            "autograd_grad": "autograd.grad per loss",
            "article": "the article's pattern",
        },
        "size": "model (width × depth)",
        "ratio": "time per step ÷ summed backward",
        "time_title": "Time per step, relative to one summed backward",
        "peak": "peak held by graphs (MiB)",
        "held": "still held after the step (MiB)",
        "alloc": "allocator's peak, gradients None (MiB)",
        "mem_title": "Memory of one step, largest model ({size})",
        "iteration": "iteration",
        "held_iter": "held by graphs after the iteration (MiB)",
        "loop_title": "A training loop with retain_graph=True left on",
        "loop": {
            "correct": "no retain_graph",
            "retain": "retain_graph=True",
            "retain_keep_loss": "retain_graph=True + losses.append(loss)",
            "keep_loss": "losses.append(loss), no retain_graph",
        },
        "step": "step",
        "ms_step": "time per step (ms)",
        "mib_step": "held by graphs after the step (MiB)",
        "bptt_title": "Truncated BPTT, {steps} steps",
        "bptt": {
            "not_detached_retain": "hidden state not detached + retain_graph=True",
            "detached": "hidden state detached",
        },
        "table": {
            "size": "Model",
            "strategy": "Strategy",
            "median": "Median time per step",
            "ratio": "÷ summed",
            "peak": "Peak held by graphs",
            "held": "Held after the step",
            "range": "Time ÷ summed (range over the sizes)",
            "peak_largest": "Peak held, largest model",
            "held_largest": "Held after the step, largest model",
            "alloc_none": "Allocator peak, gradients None",
            "alloc_zeroed": "Allocator peak, gradients zeroed",
            "vs_summed": "÷ summed",
        },
    },
    "zh": {
        "strategy": {
            "retain": "保留计算图 + 两次反向传播",
            "recompute": "重新计算",
            "summed": "损失相加后一次反向传播",
            "autograd_grad": "逐个损失调用 autograd.grad",
            "article": "那篇流行文章的写法",
        },
        "size": "模型（宽度 × 深度）",
        "ratio": "每步耗时（相对于损失相加，倍）",
        "time_title": "每步耗时，以损失相加后一次反向传播为基准",
        "peak": "计算图占用峰值（MiB）",
        "held": "这一步结束后仍占用（MiB）",
        "alloc": "分配器峰值，梯度为 None（MiB）",
        "mem_title": "一步训练的内存，最大的模型（{size}）",
        "iteration": "迭代次数",
        "held_iter": "迭代结束后计算图仍占用（MiB）",
        "loop_title": "训练循环里忘了去掉 retain_graph=True",
        "loop": {
            "correct": "不加 retain_graph",
            "retain": "retain_graph=True",
            "retain_keep_loss": "retain_graph=True + losses.append(loss)",
            "keep_loss": "losses.append(loss)，不加 retain_graph",
        },
        "step": "步数",
        "ms_step": "每步耗时（毫秒）",
        "mib_step": "这一步结束后计算图仍占用（MiB）",
        "bptt_title": "截断 BPTT，共 {steps} 步",
        "bptt": {
            "not_detached_retain": "隐藏状态不调用 detach() + retain_graph=True",
            "detached": "隐藏状态调用 detach()",
        },
        "table": {
            "size": "模型",
            "strategy": "写法",
            "median": "每步耗时中位数",
            "ratio": "相对于损失相加（倍）",
            "peak": "计算图占用峰值",
            "held": "这一步结束后仍占用",
            "range": "耗时相对于损失相加（倍，各规模的范围）",
            "peak_largest": "计算图占用峰值（最大的模型）",
            "held_largest": "这一步结束后仍占用（最大的模型）",
            "alloc_none": "分配器峰值，梯度为 `None`",
            "alloc_zeroed": "分配器峰值，梯度已分配并清零",
            "vs_summed": "相对于损失相加（倍）",
            # Tables are Markdown: code names go in code spans there, not in figures.
            "strategy_names": {"autograd_grad": "逐个损失调用 `torch.autograd.grad`"},
            "span": "{lo}～{hi}",
        },
    },
}

MIB = 2**20


def find_cjk_font() -> str | None:
    for path in CJK_FONT_FILES:
        if Path(path).exists():
            return path
    for entry in font_manager.findSystemFonts():
        if "NotoSansCJK-Regular" in entry or "NotoSansSC" in entry:
            return entry
    return None


def setup(lang: str) -> None:
    plt.rcdefaults()
    families = ["DejaVu Sans"]
    if lang == "zh":
        font = find_cjk_font()
        if font is None:
            raise SystemExit(
                "no CJK font for the Chinese figures: install one (Debian: apt-get install "
                "fonts-noto-cjk)"
            )
        font_manager.fontManager.addfont(font)
        families = [CJK_FAMILY, "DejaVu Sans"]
    plt.rcParams.update(
        {
            "font.family": families,
            "font.size": 10,
            "svg.fonttype": "path",  # text as paths: no font needed to read the figure
            "svg.hashsalt": "retain-graph",  # stable ids, so unchanged figures diff clean
            "figure.facecolor": "none",
            "axes.facecolor": "none",
            "savefig.transparent": True,
            "axes.edgecolor": INK,
            "axes.labelcolor": INK,
            "axes.titlecolor": INK,
            "text.color": INK,
            "xtick.color": INK,
            "ytick.color": INK,
            "grid.color": GRID,
            "legend.frameon": False,
            "hatch.color": "#ffffffa0",  # light hatching on mid-tone bars: visible on both
            "hatch.linewidth": 0.8,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )


def size_label(row_or_size: dict) -> str:
    return f"{row_or_size['width']} × {row_or_size['depth']}"


def save(fig, name: str, lang: str, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.{lang}.svg"
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    return path


def strategy_names(results: dict) -> list[str]:
    seen = []
    for row in results["strategies"]:
        if row["strategy"] not in seen:
            seen.append(row["strategy"])
    return seen


def size_names(results: dict) -> list[str]:
    seen = []
    for row in results["strategies"]:
        if row["size"] not in seen:
            seen.append(row["size"])
    return seen


def rows_by(results: dict) -> dict[tuple[str, str], dict]:
    return {(r["size"], r["strategy"]): r for r in results["strategies"]}


def figure_time(results: dict, lang: str, out_dir: Path) -> Path:
    t = TEXT[lang]
    rows = rows_by(results)
    sizes, strategies = size_names(results), strategy_names(results)
    fig, ax = plt.subplots(figsize=(7.2, 3.8))
    width = 0.8 / len(strategies)
    for i, s in enumerate(strategies):
        xs = [k + (i - (len(strategies) - 1) / 2) * width for k in range(len(sizes))]
        ys = [rows[(z, s)]["ratio_to_summed"] for z in sizes]
        ax.bar(xs, ys, width * 0.92, label=t["strategy"][s], color=COLORS[s],
               hatch=HATCHES[s], edgecolor="none")
    ax.axhline(1.0, color=INK, linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(sizes)), [size_label(rows[(z, strategies[0])]) for z in sizes])
    ax.set_xlabel(t["size"])
    ax.set_ylabel(t["ratio"])
    ax.set_title(t["time_title"])
    ax.grid(axis="y")
    ax.set_axisbelow(True)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize=9)
    return save(fig, "strategies-time", lang, out_dir)


def figure_memory(results: dict, lang: str, out_dir: Path) -> Path:
    t = TEXT[lang]
    rows = rows_by(results)
    largest = size_names(results)[-1]
    strategies = strategy_names(results)
    fig, ax = plt.subplots(figsize=(7.2, 4.2))
    ys = range(len(strategies))
    bars = [
        ("peak", "peak_bytes", "", 1.0),
        ("held", "held_after_bytes", "///", 0.6),
        ("alloc", "alloc_peak_bytes", "..", 0.35),
    ]
    values = {key: [(rows[(largest, s)][key] or 0) / MIB for s in strategies]
              for _, key, _, _ in bars}
    top = max(max(v) for v in values.values())
    digits = 1 if top >= 10 else 3
    height = 0.27
    for k, (label, key, hatch, alpha) in enumerate(bars):
        offset = (k - 1) * height
        ax.barh([y + offset for y in ys], values[key], height * 0.95,
                color=[COLORS[s] for s in strategies], hatch=hatch, alpha=alpha,
                label=t[label])
        for y, v in zip(ys, values[key], strict=True):
            ax.text(v, y + offset, f" {v:.{digits}f}", va="center", fontsize=7)
    ax.set_yticks(list(ys), [t["strategy"][s] for s in strategies])
    ax.invert_yaxis()
    ax.set_xlabel("MiB")
    ax.set_title(t["mem_title"].format(size=size_label(rows[(largest, strategies[0])])))
    ax.grid(axis="x")
    ax.set_axisbelow(True)
    ax.set_xlim(0, top * 1.14)
    ax.legend(loc="upper center", bbox_to_anchor=(0.4, -0.14), ncol=2, fontsize=9)
    return save(fig, "strategies-memory", lang, out_dir)


def figure_forgotten_retain(results: dict, lang: str, out_dir: Path) -> Path:
    t = TEXT[lang]
    variants = results["forgotten_retain"]["variants"]
    styles = {
        "correct": (COLORS["summed"], "-", "o"),
        "retain": (COLORS["retain"], "-", "s"),
        "retain_keep_loss": (COLORS["article"], "-", "^"),
        "keep_loss": (COLORS["recompute"], "--", "x"),
    }
    fig, ax = plt.subplots(figsize=(7.2, 3.6))
    for name, data in variants.items():
        held = [b / MIB for b in data["held_after_iteration_bytes"]]
        color, line, marker = styles[name]
        wide = name == "correct"  # drawn under the identical zero line of keep_loss
        ax.plot(range(1, len(held) + 1), held, line, color=color, marker=marker,
                markersize=7 if wide else 4, linewidth=4 if wide else 1.5,
                alpha=0.6 if wide else 1.0, label=t["loop"][name])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(t["iteration"])
    ax.set_ylabel(t["held_iter"])
    ax.set_title(t["loop_title"])
    ax.grid(True)
    ax.set_axisbelow(True)
    ax.legend(fontsize=9)
    return save(fig, "forgotten-retain", lang, out_dir)


def rolling_median(values: list[float], window: int) -> list[float]:
    half = window // 2
    return [
        statistics.median(values[max(0, i - half) : i + half + 1]) for i in range(len(values))
    ]


def figure_bptt(results: dict, lang: str, out_dir: Path) -> Path:
    t = TEXT[lang]
    bptt = results["truncated_bptt"]
    colors = {"not_detached_retain": COLORS["article"], "detached": COLORS["summed"]}
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(8.4, 3.4), gridspec_kw={"wspace": 0.35})
    for name in ("not_detached_retain", "detached"):
        ms = [s * 1e3 for s in bptt[name]["seconds_per_step"]]
        steps = range(1, len(ms) + 1)
        ax_t.plot(steps, ms, ".", color=colors[name], markersize=2, alpha=0.35)
        ax_t.plot(steps, rolling_median(ms, 15), "-", color=colors[name],
                  label=t["bptt"][name])
        held = [b / MIB for b in bptt[name]["held_after_step_bytes"]]
        ax_m.plot(steps, held, "-", color=colors[name], label=t["bptt"][name])
    ax_t.set_xlabel(t["step"])
    ax_t.set_ylabel(t["ms_step"])
    ax_m.set_xlabel(t["step"])
    ax_m.set_ylabel(t["mib_step"])
    for ax in (ax_t, ax_m):
        ax.grid(True)
        ax.set_axisbelow(True)
    ax_t.legend(loc="upper center", bbox_to_anchor=(1.1, -0.18), ncol=2, fontsize=9)
    fig.suptitle(t["bptt_title"].format(steps=bptt["size"]["steps"]), color=INK)
    return save(fig, "truncated-bptt", lang, out_dir)


def human_time(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.0f} µs"


def mib(n: int | None) -> str:
    return "–" if n is None else f"{n / MIB:.2f} MiB"


def table_strategy(t: dict, s: str) -> str:
    """A strategy's name in a Markdown table (may differ from the figure label)."""
    return t["table"].get("strategy_names", {}).get(s, t["strategy"][s])


def table_strategies(results: dict, lang: str) -> str:
    t = TEXT[lang]
    h = t["table"]
    lines = [
        f"| {h['size']} | {h['strategy']} | {h['median']} | {h['ratio']} | {h['peak']} "
        f"| {h['held']} | {h['alloc_none']} | {h['alloc_zeroed']} |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results["strategies"]:
        lines.append(
            f"| {size_label(r)} | {table_strategy(t, r['strategy'])} | {human_time(r['median_s'])} "
            f"| {r['ratio_to_summed']:.2f} | {mib(r['peak_bytes'])} "
            f"| {mib(r['held_after_bytes'])} | {mib(r['alloc_peak_bytes'])} "
            f"| {mib(r['alloc_peak_grads_zeroed_bytes'])} |"
        )
    return "\n".join(lines) + "\n"


REAL_PEAK_SIZE = (1024, 4)  # the size the audit measured


def table_real_peak(results: dict, lang: str) -> str:
    """Saved-tensor peak next to the allocator's peak, at width 1024 and depth 4."""
    t = TEXT[lang]
    h = t["table"]
    by = {(r["width"], r["depth"], r["strategy"]): r for r in results["strategies"]}
    if not any(k[:2] == REAL_PEAK_SIZE for k in by):  # quick mode: the largest size instead
        last = results["strategies"][-1]
        size = (last["width"], last["depth"])
    else:
        size = REAL_PEAK_SIZE
    summed = by[(*size, "summed")]
    lines = [
        f"| {h['strategy']} | {h['peak']} | {h['alloc_none']} | {h['vs_summed']} "
        f"| {h['alloc_zeroed']} | {h['vs_summed']} |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    none, zeroed = "alloc_peak_bytes", "alloc_peak_grads_zeroed_bytes"
    for s in strategy_names(results):
        r = by[(*size, s)]
        lines.append(
            f"| {table_strategy(t, s)} | {mib(r['peak_bytes'])} | {mib(r[none])} "
            f"| {r[none] / summed[none]:.2f} | {mib(r[zeroed])} "
            f"| {r[zeroed] / summed[zeroed]:.2f} |"
        )
    return "\n".join(lines) + "\n"


def table_summary(results: dict, lang: str) -> str:
    t = TEXT[lang]
    h = t["table"]
    rows = rows_by(results)
    sizes = size_names(results)
    largest = sizes[-1]
    lines = [
        f"| {h['strategy']} | {h['range']} | {h['peak_largest']} | {h['held_largest']} |",
        "| --- | ---: | ---: | ---: |",
    ]
    for s in strategy_names(results):
        ratios = [rows[(z, s)]["ratio_to_summed"] for z in sizes]
        span = f"{min(ratios):.2f}" if min(ratios) == max(ratios) else (
            h.get("span", "{lo} – {hi}").format(lo=f"{min(ratios):.2f}", hi=f"{max(ratios):.2f}")
        )
        big = rows[(largest, s)]
        lines.append(
            f"| {table_strategy(t, s)} | {span} | {mib(big['peak_bytes'])} "
            f"| {mib(big['held_after_bytes'])} |"
        )
    return "\n".join(lines) + "\n"


MACHINE_TEXT = {
    "en": {
        "what": "What", "value": "Value", "cpu": "CPU", "cpus": "logical CPUs",
        "threads": "torch threads", "torch": "PyTorch", "python": "Python",
        "device": "device", "date": "date (UTC)",
        "load": "load average at the start (1, 5, 15 min)",
        "total": "whole run", "seconds": "{s:.0f} s",
        "memory_date": "memory columns measured again (UTC), timings kept",
    },
    "zh": {
        "what": "项目", "value": "值", "cpu": "CPU", "cpus": "逻辑 CPU 数",
        "threads": "torch 线程数", "torch": "PyTorch", "python": "Python",
        "device": "设备", "date": "日期（UTC）", "load": "开始时的平均负载（1、5、15 分钟）",
        "total": "完整运行耗时", "seconds": "{s:.0f} 秒",
        "memory_date": "内存各列重新测量的日期（UTC），耗时沿用原结果",
    },
}


def table_machine(results: dict, lang: str) -> str:
    t = MACHINE_TEXT[lang]
    m = results["machine"]
    rows = [
        (t["cpu"], m["cpu"]),
        (t["cpus"], str(m["logical_cpus"])),
        (t["threads"], str(m["torch_threads"])),
        (t["device"], results["device"]),
        (t["torch"], m["torch"]),
        (t["python"], m["python"]),
        (t["date"], results["date"].replace("T", " ").removesuffix("+00:00")),
    ]
    if "load_average_at_start" in m:
        rows.append((t["load"], ", ".join(f"{v:.2f}" for v in m["load_average_at_start"])))
    rows.append((t["total"], t["seconds"].format(s=results["total_seconds"])))
    if "memory_rerun" in results:
        rerun = results["memory_rerun"]["date"]
        rows.append((t["memory_date"], rerun.replace("T", " ").removesuffix("+00:00")))
    lines = [f"| {t['what']} | {t['value']} |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines) + "\n"


TABLES = {
    "strategies": table_strategies,
    "real_peak": table_real_peak,
    "summary": table_summary,
    "machine": table_machine,
}


def write_tables(results: dict, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, table in TABLES.items():
        for lang in LANGS:
            path = out_dir / f"{name}.{lang}.md"
            path.write_text(table(results, lang), encoding="utf-8")
            paths.append(path)
    return paths


FIGURES = (figure_time, figure_memory, figure_forgotten_retain, figure_bptt)


def generate(results_path: Path = RESULTS, figures_dir: Path = FIGURES_DIR,
             tables_dir: Path = TABLES_DIR) -> list[Path]:
    results = json.loads(results_path.read_text(encoding="utf-8"))
    written = []
    for lang in LANGS:
        setup(lang)
        written += [figure(results, lang, figures_dir) for figure in FIGURES]
    written += write_tables(results, tables_dir)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--figures", type=Path, default=FIGURES_DIR)
    parser.add_argument("--tables", type=Path, default=TABLES_DIR)
    args = parser.parse_args(argv)
    for path in generate(args.results, args.figures, args.tables):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
