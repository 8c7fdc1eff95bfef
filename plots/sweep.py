#!/usr/bin/env python3
"""Plots of a parameter sweep (`zerosim sweep --out FILE.csv|json`, or any CSV/JSON table with
one row per point): a line plot of a metric vs one column, one line per value of another
(tokens/s vs nodes per ZeRO stage), or a heatmap of a metric over two columns. Points that do
not fit in memory or failed are marked, not dropped silently.

    zerosim sweep ... --out sweep.csv && python3 plots/sweep.py sweep.csv --x cluster.nodes --group zero.stage --metric tokens_per_s -o tps.png
    python3 plots/sweep.py sweep.csv --x zero.stage --y cluster.nodes --metric mfu -o mfu.png
"""

import csv
import os
import statistics
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402


def convert(v):
    """CSV text -> number, bool or None where it is one."""
    if not isinstance(v, str):
        return v
    s = v.strip()
    if s == "":
        return None
    low = s.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        f = float(s)
        return int(f) if f.is_integer() and "." not in s and "e" not in low else f
    except ValueError:
        return s


def load_rows(path):
    """Rows (dicts with dotted column names) of a CSV or JSON sweep."""
    if path.endswith(".csv"):
        try:
            with open(path, newline="", encoding="utf-8") as f:
                return [{k: convert(v) for k, v in row.items()} for row in csv.DictReader(f)]
        except OSError as e:
            sys.exit("error: cannot read %s: %s" % (path, e))
    doc = _common.load_json(path)
    if isinstance(doc, dict):
        for key in ("rows", "points", "results"):
            if isinstance(doc.get(key), list):
                doc = doc[key]
                break
    if not isinstance(doc, list):
        sys.exit("error: %s: expected a .csv file or a JSON list of rows" % path)
    return [_common.flatten(r) for r in doc if isinstance(r, dict)]


def sort_key(v):
    return (0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, str(v))


def is_failed(row, fits_col, error_col):
    """(failed, reason): a row that does not fit or carries an error."""
    fits = row.get(fits_col)
    if fits is False or fits == 0:
        return True, "does not fit"
    err = row.get(error_col)
    if err not in (None, "", False):
        return True, "error"
    return False, ""


def aggregate(values, how):
    if how == "max":
        return max(values)
    if how == "min":
        return min(values)
    if how == "mean":
        return statistics.fmean(values)
    return values[0]


def default_agg(metric):
    lower_is_better = ("time", "memory", "bytes", "exposed", "bubble")
    return "min" if any(w in metric for w in lower_is_better) else "max"


def fmt_value(v, _pos=None):
    """Axis/cell text: integers as they are, other numbers to 3 significant digits, 12.3k."""
    if v is None:
        return ""
    if abs(v) >= 1e4:
        return _common.fmt_si(v)
    if isinstance(v, int) or (_pos is not None and float(v).is_integer()):
        return "%d" % v
    return "%#.3g" % v if v != 0 else "0"


def main():
    p = _common.parser("Line plot or heatmap of a zerosim parameter sweep.", "sweep.png")
    p.add_argument("table", help="sweep output: .csv (header row) or .json (list of rows)")
    p.add_argument("--x", required=True, help="column on the x axis (e.g. cluster.nodes)")
    p.add_argument("--metric", default="tokens_per_s",
                   help="column plotted: y of the line plot, colour of the heatmap "
                   "(default %(default)s)")
    p.add_argument("--group", help="line plot: one line per value of this column "
                   "(e.g. zero.stage)")
    p.add_argument("--y", help="heatmap: column on the y axis (giving it makes a heatmap)")
    p.add_argument("--kind", choices=["line", "heatmap"],
                   help="default: heatmap when --y is given, else line")
    p.add_argument("--filter", action="append", default=[], metavar="COL=VALUE",
                   help="keep only rows where COL equals VALUE (repeatable)")
    p.add_argument("--agg", choices=["max", "min", "mean", "first"],
                   help="combine rows that land on the same point (default: min for times, "
                   "memory and bytes, else max)")
    p.add_argument("--fits-column", default="fits", help="column saying the point fits "
                   "(default %(default)s)")
    p.add_argument("--error-column", default="error", help="column holding a failure "
                   "message (default %(default)s)")
    p.add_argument("--logx", action="store_true", help="log-2 x axis (line plot; automatic "
                   "for positive numeric x spanning 8x or more)")
    p.add_argument("--logy", action="store_true", help="log y axis (line plot)")
    p.add_argument("--xlabel", help="x axis label (default: from the column name)")
    p.add_argument("--ylabel", help="y axis label (default: from the column name)")
    args = p.parse_args()
    kind = args.kind or ("heatmap" if args.y else "line")
    if kind == "heatmap" and not args.y:
        p.error("a heatmap needs --y")

    rows = load_rows(args.table)
    if not rows:
        sys.exit("error: %s has no rows" % args.table)
    columns = set().union(*rows)
    for col in [args.x, args.metric] + ([args.group] if args.group else []) + \
            ([args.y] if kind == "heatmap" else []):
        if col not in columns:
            sys.exit("error: %s has no column %r; columns: %s" %
                     (args.table, col, ", ".join(sorted(columns))))
    for f in args.filter:
        col, _, val = f.partition("=")
        if col not in columns:
            sys.exit("error: --filter %s: no column %r" % (f, col))
        rows = [r for r in rows if str(r.get(col)) == val or r.get(col) == convert(val)]
    if not rows:
        sys.exit("error: no row is left after --filter")

    how = args.agg or default_agg(args.metric)
    scale = _common.value_scale(args.metric)
    second = args.group if kind == "line" else args.y
    points = {}  # (x, second) -> {"ok": [values], "failed": [reasons]}
    for r in rows:
        key = (r.get(args.x), r.get(second) if second else None)
        slot = points.setdefault(key, {"ok": [], "failed": [], "rows": []})
        slot["rows"].append(r)
        failed, reason = is_failed(r, args.fits_column, args.error_column)
        v = r.get(args.metric)
        if failed or not isinstance(v, (int, float)) or isinstance(v, bool):
            slot["failed"].append(reason or "no value")
        else:
            slot["ok"].append(v * scale)
    dup = [k for k, s in points.items() if len(s["rows"]) > 1]
    if dup:
        varying = sorted(c for c in columns if c not in (args.x, second, args.metric) and
                         any(len({repr(r.get(c)) for r in points[k]["rows"]}) > 1 for k in dup))
        print("note: %d points have several rows (varying: %s); plotting their %s" %
              (len(dup), ", ".join(varying[:6]) or "nothing", how), file=sys.stderr)

    xs = sorted({k[0] for k in points}, key=sort_key)
    seconds = sorted({k[1] for k in points}, key=sort_key)
    xlabel = args.xlabel or _common.axis_label(args.x)
    mlabel = args.ylabel if kind == "line" and args.ylabel else _common.axis_label(args.metric)
    plt = _common.pyplot()

    if kind == "line":
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
        pos = {x: (x if numeric else i) for i, x in enumerate(xs)}
        any_failed = False
        for i, g in enumerate(seconds):
            c = "C%d" % (i % 10)
            good = [(pos[x], aggregate(points[(x, g)]["ok"], how)) for x in xs
                    if (x, g) in points and points[(x, g)]["ok"]]
            bad = [pos[x] for x in xs if (x, g) in points and not points[(x, g)]["ok"]]
            label = _common.short_setting(args.group, g) if args.group else None
            if good:
                ax.plot([a for a, _ in good], [b for _, b in good], "-o", color=c,
                        markersize=4, label=label)
            elif label:
                ax.plot([], [], "x", color=c, mew=2, label=label + " (no point fits/ran)")
            if bad:
                any_failed = True
                # Failed points sit on the x axis as crosses in the line's colour.
                ax.plot(bad, [0] * len(bad), "x", color=c, markersize=8, mew=2, clip_on=False,
                        transform=ax.get_xaxis_transform())
        if any_failed:
            ax.plot([], [], "x", color="0.3", mew=2, label="does not fit / failed")
        if args.logx or (numeric and min(xs) > 0 and max(xs) / min(xs) >= 8):
            ax.set_xscale("log", base=2)
        if args.logy:
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
            from matplotlib.ticker import FuncFormatter
            ax.yaxis.set_major_formatter(FuncFormatter(fmt_value))
        ax.set_xticks([pos[x] for x in xs])
        ax.set_xticklabels([fmt_value(x) if numeric else str(x) for x in xs])
        ax.minorticks_off()
        ax.set_xlabel(xlabel)
        ax.set_ylabel(mlabel)
        if args.group or any_failed:
            ax.legend(fontsize=8, title=_common.axis_label(args.group) if args.group else None,
                      title_fontsize=8)
        ax.set_title(args.title or "%s vs %s" % (mlabel.split(" (")[0], xlabel.split(" (")[0]))
    else:
        import numpy as np
        grid = np.full((len(seconds), len(xs)), np.nan)
        notes = {}
        for (x, y), slot in points.items():
            i, j = seconds.index(y), xs.index(x)
            if slot["ok"]:
                grid[i, j] = aggregate(slot["ok"], how)
            else:
                notes[(i, j)] = slot["failed"][0]
        fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(xs) + 3), max(3.5, 0.55 * len(seconds) + 2)))
        cmap = plt.get_cmap("viridis").copy()
        cmap.set_bad("0.85")
        im = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, aspect="auto", origin="lower")
        cbar = fig.colorbar(im, ax=ax)
        cbar.set_label(mlabel)
        finite = grid[np.isfinite(grid)]
        mid = (finite.min() + finite.max()) / 2 if finite.size else 0
        for i in range(len(seconds)):
            for j in range(len(xs)):
                if np.isfinite(grid[i, j]):
                    ax.text(j, i, fmt_value(float(grid[i, j])), ha="center", va="center",
                            fontsize=8, color="white" if grid[i, j] < mid else "black")
                elif (i, j) in notes:
                    ax.text(j, i, notes[(i, j)].replace(" ", "\n", 1), ha="center", va="center", fontsize=8,
                            color="#d62728")
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels([fmt_value(x) if isinstance(x, (int, float)) else str(x) for x in xs])
        ax.set_yticks(range(len(seconds)))
        ax.set_yticklabels([fmt_value(y) if isinstance(y, (int, float)) else str(y)
                            for y in seconds])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(args.ylabel or _common.axis_label(args.y))
        ax.grid(False)
        ax.set_title(args.title or "%s over %s and %s" % (
            mlabel.split(" (")[0], xlabel.split(" (")[0],
            (args.ylabel or _common.axis_label(args.y)).split(" (")[0]))
    fig.tight_layout()
    _common.save(fig, args.out)


if __name__ == "__main__":
    main()
