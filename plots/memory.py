#!/usr/bin/env python3
"""Per-GPU memory breakdown from zerosim reports: one stacked bar per report (`zerosim simulate
--json` or `zerosim memory --json`, e.g. one per ZeRO stage) with params, grads, optimizer
states, activations and buffers, the peak, and the GPU's capacity. With --trace, a second panel
shows each pipeline stage's peak allocated memory from a trace's per-rank memory counters.

    for z in 0 1 2 3; do zerosim memory --zero $z --json mem$z.json; done && python3 plots/memory.py mem0.json mem1.json mem2.json mem3.json -o memory.png
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

CATEGORIES = [("params", "parameters"), ("grads", "gradients"),
              ("optimizer_states", "optimizer states"), ("activations", "activations"),
              ("buffers", "buffers (buckets, gathered params, context)")]


def stage_peaks(trace_path):
    """{stage: (peak GiB, [ranks])} from a trace's "memory (GiB)" counters: the stages of the
    ranks the trace holds (`zerosim simulate --trace` keeps the first of each stage)."""
    doc = _common.load_json(trace_path)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    stage = _common.pipeline_stages(events)
    peak = {}
    for ev in events:
        if ev.get("ph") == "C" and ev.get("name", "").startswith("memory"):
            v = max(ev["args"].values())
            peak[ev["pid"]] = max(peak.get(ev["pid"], 0.0), v)
    if not peak:
        sys.exit("error: %s has no memory counters" % trace_path)
    out = {}
    for pid, v in sorted(peak.items()):
        st = stage.get(pid, 0)
        best, ranks = out.get(st, (0.0, []))
        out[st] = (max(best, v), ranks + [pid])
    return out


def main():
    p = _common.parser("Per-GPU memory breakdown from zerosim JSON reports.", "memory.png")
    p.add_argument("reports", nargs="*",
                   help="`zerosim simulate --json` or `zerosim memory --json` outputs")
    p.add_argument("--labels", nargs="+", help="one bar label per report (default: the "
                   "scenario settings that differ between the reports)")
    p.add_argument("--trace-labels", nargs="+", help="one legend label per --trace")
    p.add_argument("--trace", action="append", default=[],
                   help="a `zerosim simulate --trace` file: adds peak memory per pipeline "
                   "stage (repeatable)")
    args = p.parse_args()
    if not args.reports and not args.trace:
        p.error("give at least one report or --trace")

    reports = [_common.load_json(path) for path in args.reports]
    for path, r in zip(args.reports, reports):
        for key in ("memory_per_gpu_bytes", "fits_in_memory", "gpu_memory_bytes"):
            if key not in r:
                sys.exit("error: %s has no %s (not a zerosim simulate/memory report)" % (path, key))
    labels = _common.scenario_labels([r.get("scenario") for r in reports], args.labels) \
        if reports else []
    # Two reports of the same scenario would share a label: tell them apart by their place.
    labels = [lab if labels.count(lab) == 1 else "%s (#%d)" % (lab, i + 1)
              for i, lab in enumerate(labels)]
    drawn = {"bars": [], "stages": []}

    plt = _common.pyplot()
    panels = (1 if reports else 0) + (1 if args.trace else 0)
    widths = ([max(4.0, 1.1 * len(reports) + 4.0)] if reports else []) + \
             ([max(3.5, 1.6 * len(args.trace) + 2.5)] if args.trace else [])
    fig, axes = plt.subplots(1, panels, figsize=(sum(widths) + 1.5, 4.8), squeeze=False,
                             gridspec_kw={"width_ratios": widths})
    axes = list(axes[0])

    if reports:
        ax = axes.pop(0)
        xs = range(len(reports))
        bottom = [0.0] * len(reports)
        for key, name in CATEGORIES:
            vals = [r["memory_per_gpu_bytes"].get(key, 0) / _common.GIB for r in reports]
            ax.bar(xs, vals, 0.6, bottom=bottom, color=_common.COLORS[key], label=name)
            bottom = [b + v for b, v in zip(bottom, vals)]
        peaks = [r["memory_per_gpu_bytes"].get("peak", 0) / _common.GIB for r in reports]
        ax.hlines(peaks, [x - 0.34 for x in xs], [x + 0.34 for x in xs], color="black",
                  linewidth=2, zorder=3, label="peak (largest sum at one time)")
        for x, pk, stack, r, path, lab in zip(xs, peaks, bottom, reports, args.reports, labels):
            fits = r["fits_in_memory"]
            # Host memory holds what offload moves there; a layout that overflows it fails too.
            host = r.get("fits_in_host_memory", True)
            ax.annotate("peak %.1f GiB%s%s" % (pk, "" if fits else "\nDOES NOT FIT",
                                               "" if host else "\nHOST MEMORY DOES NOT FIT"),
                        (x, max(pk, stack)),
                        xytext=(0, 4), textcoords="offset points", ha="center", fontsize=8,
                        color="black" if fits and host else "#d62728")
            drawn["bars"].append({"file": path, "label": lab, "peak_gib": pk, "stack_gib": stack,
                                  "fits_in_memory": fits, "fits_in_host_memory": host})
        caps = sorted({r.get("gpu_memory_bytes", 0) / _common.GIB for r in reports} - {0})
        for cap in caps:
            ax.axhline(cap, color="#d62728", linestyle="--", linewidth=1)
            ax.text(0.99, cap, "GPU memory %.0f GiB" % cap, transform=ax.get_yaxis_transform(),
                    ha="right", va="bottom", fontsize=8, color="#d62728")
        top = max(bottom + peaks + caps)
        ax.set_ylim(0, top * 1.18)
        ax.set_xticks(list(xs))
        # Long labels go one setting a line, so neighbours never run into each other.
        ax.set_xticklabels([lab.replace(", ", "\n") if len(lab) > 12 else lab for lab in labels])
        ax.set_ylabel("memory per GPU (GiB)")
        ax.set_xlabel("scenario")
        ax.grid(axis="x", visible=False)
        handles, names = ax.get_legend_handles_labels()
        ax.legend(handles[::-1], names[::-1], fontsize=7, loc="upper left",
                  bbox_to_anchor=(1.01, 1.0), title="stacked: each category's\nlargest use",
                  title_fontsize=7)
        ax.set_title("Memory per GPU")

    if args.trace:
        ax = axes.pop(0)
        n = len(args.trace)
        width = 0.8 / n
        all_stages = set()
        for i, path in enumerate(args.trace):
            peaks = stage_peaks(path)
            stages = sorted(peaks)
            all_stages.update(stages)
            xs = [s + (i - (n - 1) / 2) * width for s in stages]
            vals = [peaks[s][0] for s in stages]
            drawn["stages"] += [{"trace": path, "stage": s, "peak_gib": peaks[s][0],
                                 "ranks": peaks[s][1]} for s in stages]
            label = args.trace_labels[i] if args.trace_labels and i < len(args.trace_labels) \
                else os.path.basename(path)
            ax.bar(xs, vals, width * 0.9, label=label, color="C%d" % i)
            for x, v in zip(xs, vals):
                ax.annotate("%.1f" % v, (x, v), xytext=(0, 2), textcoords="offset points",
                            ha="center", fontsize=7)
        ax.set_xticks(sorted(all_stages))
        ax.set_xlabel("pipeline stage")
        ax.set_ylabel("peak allocated per GPU (GiB)")
        ax.grid(axis="x", visible=False)
        ax.set_title("Peak memory per pipeline stage (trace)")
        if n > 1:
            ax.legend(fontsize=7)

    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    _common.save(fig, args.out, args.summary, drawn)


if __name__ == "__main__":
    main()
