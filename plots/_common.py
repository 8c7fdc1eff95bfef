"""Helpers shared by the plot scripts: matplotlib setup, input reading, units, output."""

import argparse
import json
import math
import os
import sys

GIB = float(1 << 30)

# Consistent colours across the scripts (matplotlib's tab10, by meaning).
COLORS = {
    "forward": "#1f77b4",
    "backward": "#ff7f0e",
    "optimizer": "#2ca02c",
    "recompute": "#9467bd",
    "dp": "#d62728",
    "tp": "#8c564b",
    "pp": "#e377c2",
    "cp": "#bcbd22",
    "other": "#7f7f7f",
    "params": "#1f77b4",
    "grads": "#ff7f0e",
    "optimizer_states": "#2ca02c",
    "activations": "#d62728",
    "buffers": "#9467bd",
}


def pyplot():
    """matplotlib.pyplot on the Agg backend, or exit 3 naming the package to install."""
    try:
        import matplotlib
    except ImportError:
        sys.exit("error: matplotlib is not importable by %s; install python3-matplotlib "
                 "(bash scripts/install-deps.sh) or run the script with /usr/bin/python3"
                 % sys.executable)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 150, "axes.grid": True,
                         "grid.alpha": 0.3, "font.size": 9})
    return plt


def parser(description, default_out):
    """An argparse parser with the options every script has (-o/--out, --title, --summary)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("-o", "--out", default=default_out,
                   help="image to write; .png, .svg or .pdf (default %(default)s)")
    p.add_argument("--title", help="figure title (default: derived from the input)")
    p.add_argument("--summary", metavar="FILE.json",
                   help="also write what the figure shows as JSON: every text drawn with its "
                   "place in the image, each axis' labels and ticks, and what the script drew "
                   "from the input (the tests read it)")
    return p


def load_json(path):
    """A JSON document from PATH ("-" reads standard input); exits with a message if unreadable."""
    try:
        if path == "-":
            return json.load(sys.stdin)
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit("error: cannot read %s: %s" % (path, e))


def flatten(d, prefix=""):
    """{"zero": {"stage": 2}} -> {"zero.stage": 2}; lists are kept as values."""
    out = {}
    for k, v in d.items():
        key = prefix + str(k)
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def fmt_bytes(n, _pos=None):
    """Binary-prefixed size for axis ticks: 8 B, 64 KiB, 1 GiB."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if n == int(n) else ("%.3g %s" % (n, unit))
        n /= 1024.0
    return str(n)


def fmt_si(x):
    """Compact number for annotations: 1.23e+05 -> 123k."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    a = abs(x)
    if a >= 1e9:
        return "%.3gG" % (x / 1e9)
    if a >= 1e6:
        return "%.3gM" % (x / 1e6)
    if a >= 1e4:
        return "%.3gk" % (x / 1e3)
    return "%.3g" % x


def scenario_labels(scenarios, labels=None):
    """One short label per resolved scenario: the scenario keys that differ between them
    ("ZeRO-1", "ZeRO-3, tp 2"), or the model and cluster when there is only one."""
    if labels:
        if len(labels) != len(scenarios):
            sys.exit("error: %d labels for %d inputs" % (len(labels), len(scenarios)))
        return list(labels)
    flat = [flatten(s or {}) for s in scenarios]
    keys = sorted(set().union(*flat)) if flat else []
    skip = ("cluster.sources", "cluster.description", "model.source", "cluster.gpu.", "cluster.host.")
    differ = [k for k in keys if not k.startswith(skip)
              and len({json.dumps(f.get(k), sort_keys=True) for f in flat}) > 1]
    # Keys whose value follows from another that differs too are left out (num_gpus follows
    # nodes, dp the GPUs and tp/pp, overlap_comm's default the ZeRO stage).
    derived = {"cluster.num_gpus": ("cluster.nodes",),
               "parallel.dp": ("cluster.nodes", "cluster.num_gpus", "parallel.tp", "parallel.pp"),
               "training.gradient_accumulation_steps": ("training.global_batch_size",
                                                        "training.micro_batch_size", "parallel.dp"),
               "zero.overlap_comm": ("zero.stage",)}
    differ = [k for k in differ if not any(d in differ for d in derived.get(k, ()))]
    first = ["zero.stage", "model.name", "cluster.preset", "cluster.nodes", "cluster.num_gpus",
             "parallel.tp", "parallel.pp", "parallel.dp", "training.micro_batch_size",
             "training.global_batch_size", "parallel.recompute"]
    differ.sort(key=lambda k: (first.index(k) if k in first else len(first), k))
    out = []
    for f in flat:
        if len(flat) == 1 or not differ:
            out.append("%s, %s x %s" % (f.get("model.name", "?"), f.get("cluster.nodes", "?"),
                                          f.get("cluster.preset", "?")))
            continue
        parts = [short_setting(k, f.get(k)) for k in differ[:3]]
        out.append(", ".join(parts))
    return out


def short_setting(key, value):
    """zero.stage=3 -> "ZeRO-3", parallel.tp=2 -> "tp 2", other -> "name=value"."""
    names = {"zero.stage": "ZeRO-%s", "parallel.tp": "tp %s", "parallel.pp": "pp %s",
             "parallel.dp": "dp %s", "cluster.nodes": "%s nodes", "cluster.num_gpus": "%s GPUs",
             "training.micro_batch_size": "mbs %s", "training.global_batch_size": "gbs %s",
             "parallel.recompute": "recompute %s", "model.name": "%s",
             "cluster.preset": "%s", "zero.overlap_comm": "overlap_comm %s"}
    if key in names:
        return names[key] % (value,)
    return "%s=%s" % (key.split(".")[-1], value)


def axis_label(column):
    """Axis label with units for a report/sweep column; values are scaled by value_scale()."""
    # The columns of `zerosim sweep` (sim/explore) and the report keys they come from.
    known = {
        "step_time_s": "step time (s)",
        "tokens_per_s": "throughput (tokens/s)",
        "tflops_per_gpu": "TFLOP/s per GPU",
        "mfu": "MFU (%)",
        "peak_memory_bytes": "peak allocated memory per GPU (GiB)",
        "fits_in_memory": "fits in GPU memory (1 = yes)",
        "fits_in_host_memory": "fits in host memory (1 = yes)",
        "host_memory_per_node_bytes": "host memory per node (GiB)",
        "exposed_dp_s": "exposed data-parallel comm (s)",
        "exposed_tp_s": "exposed tensor-parallel comm (s)",
        "exposed_pp_s": "exposed pipeline comm (s)",
        "exposed_ep_s": "exposed expert-parallel comm (s)",
        "exposed_cp_s": "exposed context-parallel comm (s)",
        "offload_s": "waiting for offload (s)",
        "comm_overhead_s": "framework work for collectives (s)",
        "bubble_s": "pipeline bubble (s)",
        "zero.stage": "ZeRO stage",
        "cluster.nodes": "nodes",
        "cluster.num_gpus": "GPUs",
        "parallel.tp": "tensor-parallel degree",
        "parallel.pp": "pipeline-parallel degree",
        "parallel.dp": "data-parallel degree",
        "training.micro_batch_size": "micro-batch size",
        "training.global_batch_size": "global batch size (sequences)",
    }
    if column in known:
        return known[column]
    if column.endswith("_bytes"):
        return "%s (GiB)" % column[:-len("_bytes")].replace("_", " ")
    if column.endswith("_pct"):
        return "%s (%%)" % column[:-len("_pct")].replace("_", " ")
    if column.endswith("_s"):
        return "%s (s)" % column[:-2].replace("_", " ")
    if "exposed" in column or "bubble" in column:
        return "%s (s)" % column.replace("_", " ")
    return column


def value_scale(column):
    """Factor applied to a column's values so they match axis_label()'s unit."""
    if column == "mfu":
        return 100.0
    if column.endswith("_bytes"):
        return 1.0 / GIB
    return 1.0


def save(fig, out, summary=None, drawn=None):
    """Write the figure to OUT (format from the suffix) and print the path; with SUMMARY (a path),
    also write layout(fig) and DRAWN (what the script plotted, a dict) there as JSON."""
    ext = os.path.splitext(out)[1].lower()
    if ext not in (".png", ".svg", ".pdf"):
        sys.exit("error: --out must end in .png, .svg or .pdf, not %r" % out)
    parent = os.path.dirname(out)
    if parent:
        os.makedirs(parent, exist_ok=True)
    # The saved image is cut to what is drawn, so no label falls off its edge.
    fig.savefig(out, bbox_inches="tight")
    print(out)
    if summary:
        doc = {"image": out}
        doc.update(layout(fig))
        doc["drawn"] = drawn or {}
        with open(summary, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")


def layout(fig):
    """What a saved figure shows, in the saved image's frame (inches from its lower left corner;
    `dpi` converts to pixels): every text drawn with its role and extent, whether its clip box
    cuts it, and per axes its title, axis labels, tick labels and legend entries as drawn."""
    import matplotlib
    import matplotlib.text as mtext

    # Laid out at the saved image's resolution: text extents do not scale exactly with dpi.
    dpi = float(matplotlib.rcParams["savefig.dpi"])
    screen_dpi = fig.dpi
    fig.set_dpi(dpi)
    try:
        return _layout_at_dpi(fig, dpi)
    finally:
        fig.set_dpi(screen_dpi)


def _layout_at_dpi(fig, dpi):
    import matplotlib
    import matplotlib.text as mtext

    renderer = fig.canvas.get_renderer()
    drawn = []
    original = mtext.Text.draw

    def recording(self, rend):
        original(self, rend)
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)

    # Record the texts a draw really renders: ticks outside the view, annotations whose point is
    # off the axes and empty strings are not drawn, so they are not listed.
    mtext.Text.draw = recording
    try:
        fig.draw(renderer)
    finally:
        mtext.Text.draw = original

    roles = {}
    axes = []
    for i, ax in enumerate(fig.axes):
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                roles[id(tick.label1)] = (i, name + "tick")
                roles[id(tick.label2)] = (i, name + "tick")
            roles[id(axis.label)] = (i, name + "label")
            roles[id(axis.get_offset_text())] = (i, name + "offset")
        for t in (ax.title, ax._left_title, ax._right_title):
            roles[id(t)] = (i, "title")
        legend = ax.get_legend()
        if legend is not None:
            for t in legend.get_texts():
                roles[id(t)] = (i, "legend")
            roles[id(legend.get_title())] = (i, "legend title")
        axes.append({"title": "", "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
                     "xscale": ax.get_xscale(), "yscale": ax.get_yscale(),
                     "xtick": [], "ytick": [], "legend": [], "xoffset": "", "yoffset": ""})
    if getattr(fig, "_suptitle", None) is not None:
        roles[id(fig._suptitle)] = (None, "suptitle")

    tight = fig.get_tightbbox(renderer).padded(matplotlib.rcParams["savefig.pad_inches"])
    texts = []
    for t in drawn:
        ax_index, role = roles.get(id(t), (None, "text"))
        ext = t.get_window_extent(renderer)
        clip = t.get_clip_box() if t.get_clip_on() else None
        clipped = bool(clip is not None and (ext.x0 < clip.x0 - 0.5 or ext.x1 > clip.x1 + 0.5 or
                                             ext.y0 < clip.y0 - 0.5 or ext.y1 > clip.y1 + 0.5))
        texts.append({"text": t.get_text(), "role": role, "axes": ax_index, "clipped": clipped,
                      "extent": [round(ext.x0 / dpi - tight.x0, 4), round(ext.y0 / dpi - tight.y0, 4),
                                 round(ext.x1 / dpi - tight.x0, 4), round(ext.y1 / dpi - tight.y0, 4)]})
        if ax_index is not None:
            a = axes[ax_index]
            if role in ("xtick", "ytick", "legend"):
                a[role].append(t.get_text())
            elif role in ("title", "xoffset", "yoffset"):
                a[role] = (a[role] + " " + t.get_text()).strip()
    return {"dpi": dpi,
            "size": [round(tight.width, 4), round(tight.height, 4)], "texts": texts, "axes": axes}


def declutter(fig, annotations):
    """Moves each annotation (its text offset in points) up until it overlaps none placed before
    it, nor a title or legend. Call after fig.tight_layout(), once the axes are where they stay."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    fixed = [ax.title.get_window_extent(renderer) for ax in fig.axes if ax.get_title()]
    fixed += [ax.get_legend().get_window_extent(renderer) for ax in fig.axes if ax.get_legend()]
    placed = []

    def clash(box):
        return any(min(box.x1, o.x1) - max(box.x0, o.x0) > -1 and
                   min(box.y1, o.y1) - max(box.y0, o.y0) > -1 for o in fixed + placed)

    for a in annotations:
        for _ in range(50):
            box = a.get_window_extent(renderer)
            if not clash(box):
                break
            dx, dy = a.xyann
            a.xyann = (dx, dy + box.height * 72.0 / fig.dpi + 1)
        placed.append(a.get_window_extent(renderer))


def pipeline_stages(events):
    """Pipeline stage of each rank (pid) of a zerosim trace, read from the process-group names
    its collectives carry ("dp s1 t0", "tp s1 d0", "pp s0->s1" sent by stage 0); 0 if none."""
    import re
    stage = {}
    for ev in events:
        if ev.get("ph") != "X":
            continue
        stage.setdefault(ev["pid"], 0)
        group = (ev.get("args") or {}).get("group", "")
        m = re.match(r"(dp|tp|cp) s(\d+)\b", group)
        if m:
            stage[ev["pid"]] = int(m.group(2))
    return stage
