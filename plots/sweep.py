#!/usr/bin/env python3
"""Plots of a parameter sweep (`zerosim sweep --out FILE.csv|json`, or any CSV/JSON table with
one row per point): a line plot of a metric vs one column, one line per value of another
(tokens/s vs nodes per ZeRO stage), or a heatmap of a metric over two columns. Points that do
not fit in memory (zerosim's fits_in_memory or fits_in_host_memory false) or failed (an error)
are marked, never drawn as values; the heatmap outlines the best cell that fits.

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


# The columns `zerosim sweep` writes that say a point does not fit: GPU memory, and host memory
# when the optimizer or parameters are offloaded.
FITS_COLUMNS = ["fits_in_memory", "fits_in_host_memory"]


def json_row(r):
    """One JSON row with dotted column names. `zerosim sweep --out F.json` nests the varied keys
    under "point" ({"point": {"zero.stage": 1}, "step_time_s": ...}); they become columns of
    their own, named as in the CSV."""
    point = r.get("point")
    rest = {k: v for k, v in r.items() if k != "point"}
    out = _common.flatten(rest)
    if isinstance(point, dict):
        out.update(point)
    return out


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
    return [json_row(r) for r in doc if isinstance(r, dict)]


def sort_key(v):
    return (0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, str(v))


def is_failed(row, fits_cols, error_col):
    """(failed, reason): a row that carries an error (zerosim sweep: the layout is infeasible) or
    does not fit."""
    err = row.get(error_col) if error_col else None
    if err not in (None, "", False):
        return True, "infeasible"
    for col in fits_cols:
        fits = row.get(col)
        if fits is False or fits == 0:
            return True, "does not fit"
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
    lower_is_better = ("time", "memory", "bytes", "exposed", "bubble", "offload", "overhead")
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


def distinct_formatter():
    """A tick formatter writing fmt_value's labels, with more digits where 3 would make two ticks
    read the same (12.05 and 12.10 both "12.1"), and never an offset the axis label would not
    show. Built on call: matplotlib is imported once _common.pyplot() has checked it is there."""
    from matplotlib.ticker import Formatter

    class Distinct(Formatter):
        def __call__(self, v, pos=None):
            return fmt_value(v, pos)

        def format_ticks(self, values):
            labels = [fmt_value(v, 0) for v in values]
            digits = 4
            while len(set(labels)) < len(labels) and digits <= 12:
                labels = [("%%.%dg" % digits) % v for v in values]
                digits += 1
            return labels
    return Distinct()


def tick_labels(values):
    """One label per column value, distinct even where 3 digits would merge two (12.31, 12.34)."""
    labels = [fmt_value(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)
              for v in values]
    if len(set(labels)) < len(labels):
        labels = [repr(v) if isinstance(v, float) else str(v) for v in values]
    return labels


def best_cell(points, how):
    """The cell with the best value among those drawn as values (only rows that fit), or None."""
    ok = [(k, aggregate(slot["ok"], how)) for k, slot in points.items() if slot["ok"]]
    if not ok:
        return None
    pick = min if how == "min" else max
    return pick(ok, key=lambda kv: kv[1])


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
    p.add_argument("--fits-column", action="append", metavar="COL",
                   help="column saying the point fits, true/false (repeatable; default: "
                   "zerosim sweep's %s; `none` for a table without one)" % ", ".join(FITS_COLUMNS))
    p.add_argument("--error-column", default="error", help="column holding a failure "
                   "message (default %(default)s; `none` for a table without one)")
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
    # A fits column the table lacks is an error, not a silent "everything fits".
    fits_cols = [c for c in (args.fits_column or FITS_COLUMNS) if c != "none"]
    error_col = None if args.error_column == "none" else args.error_column
    for col, flag in [(c, "--fits-column") for c in fits_cols] + [(error_col, "--error-column")]:
        if col and col not in columns:
            sys.exit("error: %s has no column %r, which says whether a point fits or failed; "
                     "name the table's with %s (or %s none); columns: %s" %
                     (args.table, col, flag, flag, ", ".join(sorted(columns))))
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
    points = {}  # (x, second) -> {"ok": [values], "failed": [reasons], "rows": [rows]}
    for r in rows:
        key = (r.get(args.x), r.get(second) if second else None)
        slot = points.setdefault(key, {"ok": [], "failed": [], "rows": []})
        slot["rows"].append(r)
        failed, reason = is_failed(r, fits_cols, error_col)
        v = r.get(args.metric)
        if failed or not isinstance(v, (int, float)) or isinstance(v, bool):
            slot["failed"].append(reason or "no value")
        else:
            slot["ok"].append(v * scale)
    dup = [k for k, s in points.items() if len(s["rows"]) > 1]
    if dup:
        varying = sorted(c for c in columns if c not in (args.x, second, args.metric) and
                         any(len({repr(r.get(c)) for r in points[k]["rows"]}) > 1 for k in dup))
        print("note: %d points have several rows (varying: %s); plotting the %s of those that "
              "fit" % (len(dup), ", ".join(varying[:6]) or "nothing", how), file=sys.stderr)

    xs = sorted({k[0] for k in points}, key=sort_key)
    seconds = sorted({k[1] for k in points}, key=sort_key)
    xlabel = args.xlabel or _common.axis_label(args.x)
    mlabel = args.ylabel if kind == "line" and args.ylabel else _common.axis_label(args.metric)
    best = best_cell(points, how)
    best_text = None
    if best:
        (bx, bs), bv = best
        best_text = ", ".join([_common.short_setting(args.x, bx)] +
                              ([_common.short_setting(second, bs)] if second else []))
        print("best %s: %s: %s %s" % ("that fits" if fits_cols else "(fit not checked)",
                                       best_text, args.metric, fmt_value(bv / scale)))
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
                ax.plot([], [], "x", color=c, mew=2, label=label + " (no point fits)")
            if bad:
                any_failed = True
                # Failed points sit at the bottom as crosses in the line's colour, a row per
                # line so that one line's cross does not hide another's.
                ax.plot(bad, [0.03 + 0.04 * i] * len(bad), "x", color=c, markersize=7, mew=2,
                        clip_on=False, transform=ax.get_xaxis_transform())
        if any_failed:
            ax.plot([], [], "x", color="0.3", mew=2, label="does not fit / infeasible")
        if args.logx or (numeric and min(xs) > 0 and max(xs) / min(xs) >= 8):
            ax.set_xscale("log", base=2)
        if args.logy:
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
            ax.yaxis.set_major_formatter(distinct_formatter())
        ax.set_xticks([pos[x] for x in xs])
        ax.set_xticklabels(tick_labels(xs) if numeric else [str(x) for x in xs])
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
        cbar.ax.yaxis.set_major_formatter(distinct_formatter())
        finite = grid[np.isfinite(grid)]
        mid = (finite.min() + finite.max()) / 2 if finite.size else 0
        for i in range(len(seconds)):
            for j in range(len(xs)):
                if np.isfinite(grid[i, j]):
                    ax.text(j, i, fmt_value(float(grid[i, j])), ha="center", va="center",
                            fontsize=8, color="white" if grid[i, j] < mid else "black")
                elif (i, j) in notes:
                    ax.text(j, i, notes[(i, j)].replace(" ", "\n", 1), ha="center", va="center",
                            fontsize=8, color="#d62728")
        if best:
            import matplotlib.patches as patches
            (bx, bs), _ = best
            ax.add_patch(patches.Rectangle((xs.index(bx) - 0.5, seconds.index(bs) - 0.5), 1, 1,
                                           fill=False, edgecolor="#d62728", linewidth=2.5))
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels(tick_labels(xs))
        ax.set_yticks(range(len(seconds)))
        ax.set_yticklabels(tick_labels(seconds))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(args.ylabel or _common.axis_label(args.y))
        ax.grid(False)
        title = args.title or "%s over %s and %s" % (
            mlabel.split(" (")[0], xlabel.split(" (")[0],
            (args.ylabel or _common.axis_label(args.y)).split(" (")[0])
        if best_text and not args.title:
            title += "\nboxed: the best %s (%s)" % ("that fits" if fits_cols else "value",
                                                    best_text)
        ax.set_title(title)
    fig.tight_layout()

    def cell(key, slot):
        return {"x": key[0], "second": key[1], "rows": len(slot["rows"]),
                "rows_drawn": len(slot["ok"]),
                "value": aggregate(slot["ok"], how) if slot["ok"] else None,
                "status": "value" if slot["ok"] else slot["failed"][0]}
    drawn = {"kind": kind, "x": args.x, "second": second, "metric": args.metric, "scale": scale,
             "agg": how, "filter": args.filter, "fits_columns": fits_cols, "error_column": error_col,
             "cells": [cell(k, points[k]) for k in sorted(points, key=lambda k: (
                 sort_key(k[0]), sort_key(k[1])))],
             "best": None if not best else {"x": best[0][0], "second": best[0][1],
                                            "value": best[1]}}
    _common.save(fig, args.out, args.summary, drawn)


if __name__ == "__main__":
    main()
