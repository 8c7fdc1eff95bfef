#!/usr/bin/env python3
"""Timeline of one simulated step from `zerosim simulate --trace`: one row per (rank, stream),
compute coloured by phase and collectives by process group (dp, tp, pp), with each rank's
allocated memory underneath. Ranks are cluster ranks; the trace holds those `--trace-ranks`
chose (by default the first rank of each pipeline stage), and the title says how many of the
cluster's GPUs that is.

    zerosim simulate --pp 2 --trace step.json && python3 plots/timeline.py step.json -o timeline.png
"""

import collections
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402


def parse_ranks(spec):
    """"0-3,8" -> {0, 1, 2, 3, 8}."""
    out = set()
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            out.update(range(int(a), int(b) + 1))
        else:
            out.add(int(part))
    return out


def format_ranks(ranks):
    """[0, 1, 2, 3, 8] -> "0-3,8", as parse_ranks reads it."""
    out, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        out.append(str(ranks[i]) if i == j else "%d-%d" % (ranks[i], ranks[j]))
        i = j + 1
    return ",".join(out)


def kind_of(ev):
    """Colour key of a complete event: the group kind of a collective, else its phase."""
    group = (ev.get("args") or {}).get("group")
    if group:
        kind = group.split()[0]
        return kind if kind in _common.COLORS else "other"
    cat = ev.get("cat", "other")
    return cat if cat in _common.COLORS else "other"


def time_unit(span_us):
    if span_us >= 2e6:
        return "s", 1e-6
    if span_us >= 2e3:
        return "ms", 1e-3
    return "\u00b5s", 1.0


def main():
    p = _common.parser("Timeline of a step (ranks x streams) from a zerosim Chrome trace.",
                       "timeline.png")
    p.add_argument("trace", help="trace from `zerosim simulate --trace FILE`")
    p.add_argument("--ranks", help="ranks to show, e.g. 0-3,8 (default: the first rank of "
                   "each pipeline stage, or the first --max-ranks ranks without pipelining)")
    p.add_argument("--max-ranks", type=int, default=8, help="default number of ranks shown")
    p.add_argument("--start", type=float, help="window start, in ms from the step start")
    p.add_argument("--end", type=float, help="window end, in ms from the step start")
    p.add_argument("--no-memory", action="store_true", help="leave out the memory panel")
    args = p.parse_args()

    doc = _common.load_json(args.trace)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    # zerosim writes which ranks the trace holds and of how many GPUs; a trace without it is
    # taken to hold every rank.
    other = doc.get("otherData", {}) if isinstance(doc, dict) else {}
    proc, thread = {}, {}
    spans = collections.defaultdict(list)      # (pid, tid) -> [event]
    memory = collections.defaultdict(list)     # pid -> [(ts, GiB)]
    for ev in events:
        ph = ev.get("ph")
        if ph == "M" and ev.get("name") == "process_name":
            proc[ev["pid"]] = ev["args"]["name"]
        elif ph == "M" and ev.get("name") == "thread_name":
            thread[(ev["pid"], ev["tid"])] = ev["args"]["name"]
        elif ph == "X":
            spans[(ev["pid"], ev["tid"])].append(ev)
        elif ph == "C" and ev.get("name", "").startswith("memory"):
            memory[ev["pid"]].append((ev["ts"], next(iter(ev["args"].values()))))
    stage = _common.pipeline_stages(events)
    if len(set(stage.values())) > 1:
        proc = {pid: "%s (stage %d)" % (proc.get(pid, "rank %d" % pid), st) for pid, st in stage.items()}
    if not spans:
        sys.exit("error: %s has no complete (\"X\") events" % args.trace)

    all_ranks = sorted({pid for pid, _ in spans} | set(memory))
    num_gpus = other.get("num_gpus", len(all_ranks))
    stages = sorted(set(stage.values()))
    if args.ranks:
        ranks = sorted(parse_ranks(args.ranks) & set(all_ranks))
    elif len(stages) > 1:
        # The first rank of each pipeline stage (evenly spaced stages if there are too many).
        firsts = [min(r for r in all_ranks if stage.get(r) == st) for st in stages]
        step = max(1, -(-len(firsts) // args.max_ranks))
        ranks = firsts[::step]
    else:
        ranks = all_ranks[:args.max_ranks]
    if not ranks:
        sys.exit("error: none of the ranks %s is in the trace (it has %s; `zerosim simulate "
                 "--trace-ranks` picks the ranks a trace holds)" % (args.ranks, all_ranks))

    t_end = max(ev["ts"] + ev["dur"] for evs in spans.values() for ev in evs)
    lo = args.start * 1e3 if args.start is not None else 0.0
    hi = args.end * 1e3 if args.end is not None else t_end
    unit, scale = time_unit(hi - lo)

    merge_gap = (hi - lo) / 20000.0
    rows = [(pid, tid) for (pid, tid) in sorted(spans) if pid in ranks]
    plt = _common.pyplot()
    show_mem = bool(memory) and not args.no_memory
    rows_h = max(0.28 * len(rows), 1.0)
    height = 1.4 + rows_h + (1.8 if show_mem else 0)
    if show_mem:
        fig, (ax, axm) = plt.subplots(2, 1, sharex=True, figsize=(12, height),
                                      gridspec_kw={"height_ratios": [rows_h, 1.8]})
    else:
        fig, ax = plt.subplots(figsize=(12, height))

    used = []
    for y, key in enumerate(rows):
        bars = collections.defaultdict(list)
        for ev in sorted(spans[key], key=lambda ev: ev["ts"]):
            s, e = ev["ts"], ev["ts"] + ev["dur"]
            if e < lo or s > hi:
                continue
            segs = bars[kind_of(ev)]
            # Back-to-back ops of one colour merge into one bar (no anti-aliasing seams).
            if segs and s - segs[-1][1] <= merge_gap:
                segs[-1][1] = max(segs[-1][1], e)
            else:
                segs.append([s, e])
        for kind, segs in bars.items():
            segs = [(s * scale, (e - s) * scale) for s, e in segs]
            ax.broken_barh(segs, (y - 0.4, 0.8), facecolors=_common.COLORS[kind], linewidth=0)
            if kind not in used:
                used.append(kind)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(["%s \u00b7 %s" % (proc.get(pid, "rank %d" % pid),
                                          thread.get((pid, tid), "stream %d" % tid))
                        for pid, tid in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_ylabel("rank \u00b7 stream")
    ax.grid(axis="y", visible=False)
    order = ["forward", "backward", "optimizer", "dp", "tp", "pp", "cp", "other"]
    names = {"dp": "data-parallel collective", "tp": "tensor-parallel collective",
             "pp": "pipeline send/recv", "cp": "context-parallel collective"}
    handles = [plt.Rectangle((0, 0), 1, 1, color=_common.COLORS[k]) for k in order if k in used]
    ax.legend(handles, [names.get(k, k) for k in order if k in used], loc="lower center",
              bbox_to_anchor=(0.5, 1.0), ncol=len(handles), fontsize=8, frameon=False)
    shown = "%s %s of %d GPUs%s" % (
        "rank" if len(ranks) == 1 else "ranks", format_ranks(ranks), num_gpus,
        ", the first of each pipeline stage" if not args.ranks and len(stages) > 1 else "")
    ax.set_title(args.title or "Simulated step: %.4g %s, %s" % ((t_end) * time_unit(t_end)[1],
                                                               time_unit(t_end)[0], shown),
                 pad=22)

    if show_mem:
        # Ranks with the same timeline (the TP ranks of a stage) share one line.
        series = collections.OrderedDict()
        for pid in ranks:
            pts = tuple(sorted(memory.get(pid, [])))
            if pts:
                series.setdefault(pts, []).append(pid)
        for pts, pids in series.items():
            xs = [t * scale for t, _ in pts] + [max(hi, pts[-1][0]) * scale]
            ys = [v for _, v in pts] + [pts[-1][1]]
            who = proc.get(pids[0], "rank %d" % pids[0]) if len(pids) == 1 else \
                "ranks %s%s" % (",".join(str(r) for r in pids),
                                " (stage %d)" % stage[pids[0]] if len(set(stage.values())) > 1 else "")
            axm.step(xs, ys, where="post", linewidth=1,
                     label="%s: peak %.2f GiB" % (who, max(ys)))
        axm.set_ylabel("allocated (GiB)")
        axm.set_ylim(bottom=0)
        axm.legend(fontsize=7, loc="lower right", ncol=min(4, len(series)))
        axm.set_xlabel("time since step start (%s)" % unit)
    else:
        ax.set_xlabel("time since step start (%s)" % unit)
    ax.set_xlim(lo * scale, hi * scale)
    fig.tight_layout()
    drawn = {"ranks": ranks, "traced_ranks": all_ranks, "num_gpus": num_gpus, "time_unit": unit,
             "rows": [[pid, thread.get((pid, tid), "stream %d" % tid)] for pid, tid in rows]}
    _common.save(fig, args.out, args.summary, drawn)


if __name__ == "__main__":
    main()
