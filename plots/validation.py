#!/usr/bin/env python3
"""Predicted vs measured step time from `zerosim validate-published --json`: log-log scatter
with y = x and +-10 % / +-20 % bands, one colour per source (the case id's prefix, as the
report's mape_by_source_pct groups them); hollow markers are approximate cases, and a cross marks
a case zerosim predicts would not fit in GPU memory (fits_in_memory false) although it ran.

    zerosim validate-published --json published.json && python3 plots/validation.py published.json -o validation.png
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402


def group_of(case):
    return case["id"].split("-", 1)[0]


def group_label(group, n, mape):
    """"megatron (16 cases, MAPE 5.4 %)"."""
    return "%s (%d case%s%s)" % (group, n, "" if n == 1 else "s",
                                 ", MAPE %.1f %%" % mape[group] if group in mape else "")


def main():
    p = _common.parser("Predicted vs measured step time from zerosim validate-published.",
                       "validation.png")
    p.add_argument("report", help="output of `zerosim validate-published --json FILE`")
    p.add_argument("--annotate", type=int, default=5, metavar="N",
                   help="label the N cases with the largest |error| (default %(default)s)")
    p.add_argument("--exclude-approximate", action="store_true",
                   help="leave out cases marked approximate")
    args = p.parse_args()

    doc = _common.load_json(args.report)
    if "cases" not in doc:
        sys.exit("error: %s has no \"cases\" (not a validate-published report)" % args.report)
    # A case without a positive predicted and measured time has no place on log axes; it is
    # named under the plot with the skipped ones rather than left out silently.
    cases = [c for c in doc["cases"] if not c.get("skipped") and
             (c.get("predicted_step_time_s") or 0) > 0 and (c.get("measured_step_time_s") or 0) > 0]
    skipped = [c for c in doc["cases"] if c not in cases]
    if args.exclude_approximate:
        cases = [c for c in cases if not c.get("approximate")]
    if not cases:
        sys.exit("error: %s has no simulated cases" % args.report)

    plt = _common.pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 6.5))
    xs = [c["measured_step_time_s"] for c in cases]
    ys = [c["predicted_step_time_s"] for c in cases]
    lo = min(xs + ys) / 1.5
    hi = max(xs + ys) * 1.5
    line = [lo, hi]
    ax.fill_between(line, [v * 0.8 for v in line], [v * 1.2 for v in line], color="#c6dbef",
                    label="\u00b120 %", linewidth=0)
    ax.fill_between(line, [v * 0.9 for v in line], [v * 1.1 for v in line], color="#6baed6",
                    label="\u00b110 %", linewidth=0)
    ax.plot(line, line, color="black", linewidth=1, label="predicted = measured")

    mape = doc.get("mape_by_source_pct", {})
    groups = sorted({group_of(c) for c in cases})
    for i, g in enumerate(groups):
        members = [c for c in cases if group_of(c) == g]
        color = "C%d" % (i % 10)
        for approx in (False, True):
            sel = [c for c in members if bool(c.get("approximate")) == approx]
            if not sel:
                continue
            label = None
            if not approx:
                label = group_label(g, len(members), mape)
            ax.scatter([c["measured_step_time_s"] for c in sel],
                       [c["predicted_step_time_s"] for c in sel], s=36, zorder=3,
                       facecolors="none" if approx else color, edgecolors=color,
                       linewidths=1.2, label=label)
        if not any(not c.get("approximate") for c in members):
            ax.scatter([], [], s=36, facecolors="none", edgecolors=color,
                       label=group_label(g, len(members), mape))
    if any(c.get("approximate") for c in cases):
        ax.scatter([], [], s=36, facecolors="none", edgecolors="black", label="hollow: approximate")
    unfit = [c for c in cases if not c["fits_in_memory"]]
    if unfit:
        ax.scatter([c["measured_step_time_s"] for c in unfit],
                   [c["predicted_step_time_s"] for c in unfit], s=30, marker="x", zorder=4,
                   color="#d62728", linewidths=1.2,
                   label="predicted not to fit in GPU memory (%d)" % len(unfit))

    worst = sorted(cases, key=lambda c: -abs(c.get("error_pct", 0)))[:max(args.annotate, 0)]
    notes = []
    for c in worst:
        notes.append(ax.annotate("%s (%+.0f %%)" % (c["id"], c.get("error_pct", 0)),
                                 (c["measured_step_time_s"], c["predicted_step_time_s"]),
                                 xytext=(4, -10), textcoords="offset points", fontsize=6.5,
                                 color="0.25"))

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.set_xlabel("measured step time (s)")
    ax.set_ylabel("predicted step time (s)")
    overall = []
    if "mape_pct" in doc:
        overall.append("MAPE %.1f %%" % doc["mape_pct"])
    if "mape_non_approximate_pct" in doc:
        overall.append("%.1f %% without approximate cases" % doc["mape_non_approximate_pct"])
    ax.set_title(args.title or "zerosim vs published step times: %d cases%s" %
                 (len(cases), (", " + ", ".join(overall)) if overall else ""), fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    if skipped:
        ax.text(0.99, 0.01, "not drawn: " + ", ".join(c["id"] for c in skipped)[:120],
                transform=ax.transAxes, ha="right", va="bottom", fontsize=6.5, color="0.3")
    fig.tight_layout()
    _common.declutter(fig, notes)
    drawn = {"cases": [{"id": c["id"], "measured": c["measured_step_time_s"],
                        "predicted": c["predicted_step_time_s"],
                        "fits_in_memory": c["fits_in_memory"],
                        "approximate": bool(c.get("approximate")), "source": group_of(c),
                        "annotated": c in worst} for c in cases],
             "not_drawn": [c["id"] for c in skipped]}
    _common.save(fig, args.out, args.summary, drawn)


if __name__ == "__main__":
    main()
