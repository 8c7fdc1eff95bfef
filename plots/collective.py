#!/usr/bin/env python3
"""Bus bandwidth (or time) vs message size from `zerosim collective --json`, nccl-tests style:
one line per file, markers where NCCL's algorithm/protocol choice changes; optionally measured
curves from a collectives.json-format file (e.g. validate/measurements/collectives.json) on top, and the
predicted-vs-measured points of `zerosim collective --validate FILE --json`.

    zerosim collective --cluster dgx-h100 --nodes 2 --collective all_reduce -b 8 -e 1G -f 2 --json ar.json && python3 plots/collective.py ar.json -o busbw.png
"""

import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
         "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}
METRICS = {"busbw": ("busbw_GBps", "bus bandwidth (GB/s)"),
           "algbw": ("algbw_GBps", "algorithm bandwidth (GB/s)"),
           "time": ("time_us", "time (\u00b5s)")}


def size_bytes(row):
    """A data row's message size in bytes ("bytes": 1024 or "size": "32KiB")."""
    if "bytes" in row:
        return float(row["bytes"])
    m = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*", str(row.get("size", "")))
    if not m or m.group(2).upper() not in UNITS:
        return None
    return float(m.group(1)) * UNITS[m.group(2).upper()]


def gpu_token(text):
    """"dgx-h200" -> "h200", "H100 SXM" -> "h100": the GPU generation a name mentions."""
    m = re.search(r"\b([abhlv]\d{2,3}|gb\d{3}|h20)(?!\d)", str(text).lower().replace("-", " "))
    return m.group(1) if m else None


def measured_series(doc, ids, op, metric, clusters):
    """[(label, [(bytes, value)])] from a collectives.json-format list: every curve in IDS (or,
    without IDS, every size sweep of the same collective on the GPU of one of CLUSTERS) with a
    column for METRIC (busbw_GBps, busbw_1node_GBps, ..., or time_us)."""
    out = []
    want = METRICS[metric][0]
    gpus = {gpu_token(c) for c in clusters} - {None}
    for curve in doc:
        data = curve.get("data") or []
        if ids and curve.get("id") not in ids:
            continue
        if not ids:
            hw = curve.get("hardware") or {}
            if curve.get("collective") != op:
                continue
            if gpus and gpu_token(hw.get("gpu", curve.get("id"))) not in gpus:
                continue
        if not data or not isinstance(data[0], dict) or size_bytes(data[0]) is None:
            continue
        stem = want.split("_")[0]
        cols = [k for k in data[0] if k == want or
                (k.startswith(stem + "_") and k.endswith("_GBps") and metric != "time")]
        for col in cols:
            pts = [(size_bytes(r), float(r[col])) for r in data
                   if col in r and size_bytes(r) is not None and isinstance(r[col], (int, float))]
            if pts:
                suffix = col[len(stem) + 1:-len("_GBps")] if col != want else ""
                out.append(("%s%s (measured)" % (curve["id"], " " + suffix if suffix else ""), pts))
    return out


def main():
    p = _common.parser("Collective bandwidth vs message size from zerosim collective --json.",
                       "collective.png")
    p.add_argument("inputs", nargs="+", help="`zerosim collective --json` outputs (predicted "
                   "sweeps) and/or `zerosim collective --validate F --json` outputs")
    p.add_argument("--metric", choices=sorted(METRICS), default="busbw",
                   help="y axis (default %(default)s)")
    p.add_argument("--measured", help="collectives.json-format file to overlay "
                   "(e.g. validate/measurements/collectives.json)")
    p.add_argument("--measured-id", action="append", default=[],
                   help="curve id in --measured to overlay (repeatable; default: every size "
                   "sweep of the same collective)")
    p.add_argument("--labels", nargs="+", help="one legend label per input")
    args = p.parse_args()

    key, ylabel = METRICS[args.metric]
    docs = [(path, _common.load_json(path)) for path in args.inputs]
    for path, doc in docs:
        if not (isinstance(doc, dict) and ("rows" in doc or "points" in doc)):
            sys.exit("error: %s is neither a `zerosim collective --json` sweep (\"rows\") nor a "
                     "--validate report (\"points\")" % path)
    # One colour per sweep file and per validated curve; past ten, tab20 keeps them apart.
    n_colors = sum(1 if "rows" in doc else
                   len({pt["curve"] for pt in doc["points"] if pt.get("metric") == key})
                   for _, doc in docs) + (4 if args.measured else 0)
    plt = _common.pyplot()
    palette = plt.get_cmap("tab10" if n_colors <= 10 else "tab20").colors
    fig, ax = plt.subplots(figsize=(8.5, 5))
    ops = set()
    clusters = []
    color = 0
    notes = []
    drawn = {"metric_key": key, "series": []}
    for i, (path, doc) in enumerate(docs):
        if "rows" in doc:
            ops.add(doc.get("op"))
            clusters.append(doc.get("cluster", ""))
            rows = doc["rows"]
            xs = [r["bytes"] for r in rows]
            ys = [r[key] for r in rows]
            label = args.labels[i] if args.labels and i < len(args.labels) else \
                "%s, %s x %s (%d ranks, NCCL %s) predicted" % (
                    doc.get("op"), doc.get("cluster"), doc.get("nodes"), len(doc.get("ranks", [])),
                    doc.get("nccl_version", "?"))
            c = palette[color % len(palette)]
            color += 1
            ax.plot(xs, ys, "-", color=c, linewidth=1.6, label=label)
            drawn["series"].append({"label": label, "kind": "predicted", "bytes": xs,
                                    "line": True})
            # A marker where NCCL's choice changes, labelled with the new choice.
            prev = None
            for r in rows:
                choice = "%s/%s" % (r.get("algorithm"), r.get("protocol"))
                if choice != prev:
                    ax.plot(r["bytes"], r[key], "o", color=c, markersize=4)
                    notes.append(ax.annotate(choice, (r["bytes"], r[key]), xytext=(3, 5),
                                             textcoords="offset points", fontsize=6.5, color=c,
                                             rotation=30))
                prev = choice
        else:
            modelled = {cv.get("id"): cv.get("modelled", True) for cv in doc.get("curves", [])}
            curves = {}
            for pt in doc["points"]:
                if pt.get("metric") == key and pt.get("bytes"):
                    curves.setdefault(pt["curve"], []).append(pt)
            if not curves:
                print("note: %s has no %s points" % (path, key), file=sys.stderr)
            for name, pts in curves.items():
                ops.update(pt.get("op") for pt in pts)
                c = palette[color % len(palette)]
                color += 1
                asserted = modelled.get(name, True)
                # A curve may hold several setups (collectives, GPU counts, NCCL_ALGO): a line
                # joins the sizes of one setup only, never points of different setups.
                setups = {}
                for pt in pts:
                    setups.setdefault((pt.get("op"), pt.get("gpus"), pt.get("setup")), []).append(pt)
                for sub in setups.values():
                    sub.sort(key=lambda pt: pt["bytes"])
                    xs = [pt["bytes"] for pt in sub]
                    line = len(set(xs)) == len(xs) > 1
                    ax.plot(xs, [pt["predicted"] for pt in sub], linestyle="-" if line else "none",
                            marker=".", color=c, linewidth=1.4, alpha=1.0 if asserted else 0.5)
                    ax.plot(xs, [pt["measured"] for pt in sub], "x", color=c, markersize=5,
                            alpha=1.0 if asserted else 0.5)
                    for kind in ("predicted", "measured"):
                        drawn["series"].append({"label": name, "kind": kind, "bytes": xs,
                                                "line": line and kind == "predicted",
                                                "setup": list(sub[0].get(k) for k in
                                                              ("op", "gpus", "setup"))})
                ax.plot([], [], "-", marker=".", color=c, alpha=1.0 if asserted else 0.5,
                        label="%s (%s)%s" % (name, pts[0].get("preset"),
                                             "" if asserted else ", shown, not asserted"))
            if curves:
                ax.plot([], [], linestyle="none", marker=".", color="0.2", label="dot: predicted")
                ax.plot([], [], linestyle="none", marker="x", color="0.2", label="cross: measured")

    if args.measured:
        doc = _common.load_json(args.measured)
        series = measured_series(doc, set(args.measured_id), next(iter(ops), "all_reduce"),
                                 args.metric, clusters)
        if not series:
            print("note: no curve of %s matches (name one with --measured-id)" % args.measured,
                  file=sys.stderr)
        for label, pts in series:
            pts.sort()
            ax.plot([x for x, _ in pts], [y for _, y in pts], "s--",
                    color=palette[color % len(palette)], markersize=3.5, linewidth=0.8, label=label)
            drawn["series"].append({"label": label, "kind": "measured", "overlay": True,
                                    "bytes": [x for x, _ in pts], "line": True})
            color += 1

    from matplotlib.ticker import FuncFormatter, LogLocator
    ax.set_xscale("log", base=2)
    if args.metric == "time":
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: "%g" % v))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda *_: ""))
    else:
        ax.set_ylim(bottom=0)
    ax.xaxis.set_major_locator(LogLocator(base=4))
    ax.xaxis.set_major_formatter(FuncFormatter(_common.fmt_bytes))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda *_: ""))
    ax.set_xlabel("message size (nccl-tests size, bytes)")
    ax.set_ylabel(ylabel)
    ax.set_title(args.title or "%s: %s vs message size" % (
        ", ".join(sorted(o for o in ops if o)) or "collective", METRICS[args.metric][1].split(" (")[0]))
    if len(ax.get_legend_handles_labels()[0]) > 4:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.legend(fontsize=7, loc="upper left")
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    fig.tight_layout()
    _common.declutter(fig, notes)
    _common.save(fig, args.out, args.summary, drawn)


if __name__ == "__main__":
    main()
