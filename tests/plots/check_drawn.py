#!/usr/bin/env python3
"""Checks what a plot script says it drew (the "drawn" part of its --summary JSON) against the
zerosim output it was given, read here on its own rather than through plots/:

    check_drawn.py sweep SWEEP.csv|SWEEP.json SUMMARY [--unfit-would-win]
    check_drawn.py memory SUMMARY REPORT.json...
    check_drawn.py stages SUMMARY REPORT.json        (the --trace panel against the report)
    check_drawn.py validation PUBLISHED.json SUMMARY
    check_drawn.py timeline TRACE.json SUMMARY [RANK...]
    check_drawn.py collective SUMMARY INPUT.json...

sweep: every cell drawn as a value has rows that fit (fits_in_memory and fits_in_host_memory
true, no error) and shows the aggregate of exactly those; a cell whose rows all fail is never a
value; the best cell fits and is the best of the values. --unfit-would-win also asks that a row
that does not fit beats it, so the test has the case the scripts once got wrong.
"""

import csv
import json
import math
import sys

GIB = float(1 << 30)


def fail(message):
    sys.exit("FAIL: " + message)


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def close(a, b, rel=1e-9):
    return a is not None and b is not None and math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def sweep_rows(path):
    """zerosim sweep's rows as {column: value}: CSV text as written, JSON with the point's keys."""
    if path.endswith(".csv"):
        with open(path, newline="", encoding="utf-8") as f:
            return [dict(r) for r in csv.DictReader(f)]
    rows = []
    for r in load(path)["rows"]:
        row = {k: v for k, v in r.items() if k != "point"}
        row.update(r["point"])
        rows.append(row)
    return rows


def as_text(v):
    """A value as the CSV writes it, so CSV and JSON rows compare alike."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return ""
    return str(v)


def fits(row):
    return (as_text(row.get("error")) == "" and as_text(row["fits_in_memory"]) == "true" and
            as_text(row["fits_in_host_memory"]) == "true")


def check_sweep(table, summary, unfit_would_win):
    drawn = load(summary)["drawn"]
    if drawn["fits_columns"] != ["fits_in_memory", "fits_in_host_memory"]:
        fail("sweep.py judged fitting by %s, not zerosim's columns" % drawn["fits_columns"])
    rows = sweep_rows(table)
    for f in drawn["filter"]:
        col, _, val = f.partition("=")
        rows = [r for r in rows if as_text(r[col]) == val]
    x, second, metric, scale = drawn["x"], drawn["second"], drawn["metric"], drawn["scale"]
    groups = {}
    for r in rows:
        groups.setdefault((as_text(r[x]), as_text(r[second]) if second else ""), []).append(r)
    cells = {(as_text(c["x"]), as_text(c["second"]) if second else ""): c for c in drawn["cells"]}
    if set(cells) != set(groups):
        fail("cells drawn %s, the table's points %s" % (sorted(cells), sorted(groups)))
    pick = min if drawn["agg"] == "min" else max
    values = {}
    for key, members in groups.items():
        c = cells[key]
        ok = [float(r[metric]) * scale for r in members if fits(r)]
        if c["rows"] != len(members) or c["rows_drawn"] != len(ok):
            fail("cell %s: %d of %d rows drawn; %d of %d fit" %
                 (key, c["rows_drawn"], c["rows"], len(ok), len(members)))
        if not ok:
            if c["status"] == "value" or c["value"] is not None:
                fail("cell %s is drawn as %r, but none of its rows fits" % (key, c["value"]))
            continue
        want = {"min": min, "max": max}.get(drawn["agg"], lambda v: v[0])(ok)
        if c["status"] != "value" or not close(c["value"], want):
            fail("cell %s drawn as %r, its rows that fit give %r" % (key, c["value"], want))
        values[key] = want
    best = drawn["best"]
    if not values:
        if best is not None:
            fail("a best cell %s although nothing fits" % best)
        return
    bkey = (as_text(best["x"]), as_text(best["second"]) if second else "")
    if bkey not in values or not close(best["value"], pick(values.values())):
        fail("best cell %s (%r) is not the best that fits (%r)" %
             (bkey, best["value"], pick(values.values())))
    if unfit_would_win:
        unfit = [float(r[metric]) * scale for r in rows if not fits(r) and r.get(metric) not in
                 ("", None)]
        if not unfit or pick(unfit + [best["value"]]) == best["value"]:
            fail("no row that does not fit beats the best that fits: the test lost its case")
    print("ok: %s: %d cells, %d values, best %s" % (summary, len(cells), len(values), bkey))


def check_memory(summary, reports):
    drawn = load(summary)["drawn"]
    bars = drawn["bars"]
    if len(bars) != len(reports):
        fail("%d bars for %d reports" % (len(bars), len(reports)))
    texts = [t["text"] for t in load(summary)["texts"]]
    for bar, path in zip(bars, reports):
        r = load(path)
        if bar["file"] != path:
            fail("bar %s drawn from %s" % (path, bar["file"]))
        if not close(bar["peak_gib"], r["memory_per_gpu_bytes"]["peak"] / GIB):
            fail("%s: peak drawn %r GiB, report %r" % (path, bar["peak_gib"],
                                                       r["memory_per_gpu_bytes"]["peak"] / GIB))
        if bar["fits_in_memory"] != r["fits_in_memory"]:
            fail("%s: drawn as fitting=%s, report says %s" % (path, bar["fits_in_memory"],
                                                               r["fits_in_memory"]))
        if not r["fits_in_memory"] and not any("DOES NOT FIT" in t for t in texts):
            fail("%s does not fit, and no label says so" % path)
    print("ok: %s: %d bars" % (summary, len(bars)))


def check_stages(summary, report):
    stages = load(summary)["drawn"]["stages"]
    want = [s["peak"] / GIB for s in load(report)["memory_per_stage_bytes"]]
    got = [s["peak_gib"] for s in sorted(stages, key=lambda s: s["stage"])]
    # The trace writes its counters with 6 significant digits: half a unit in the last is 5e-6.
    if len(got) != len(want) or not all(close(a, b, 5e-6) for a, b in zip(got, want)):
        fail("stage peaks from the trace %s, the report's memory_per_stage_bytes %s" % (got, want))
    print("ok: %s: %d stages match the report" % (summary, len(got)))


def check_validation(published, summary):
    cases = [c for c in load(published)["cases"] if not c.get("skipped")]
    drawn = {c["id"]: c for c in load(summary)["drawn"]["cases"]}
    if set(drawn) != {c["id"] for c in cases}:
        fail("cases drawn differ from the report's simulated cases")
    for c in cases:
        d = drawn[c["id"]]
        if not (close(d["measured"], c["measured_step_time_s"]) and
                close(d["predicted"], c["predicted_step_time_s"])):
            fail("%s drawn at %s" % (c["id"], d))
        if d["fits_in_memory"] != c["fits_in_memory"]:
            fail("%s: drawn as fitting=%s, report says %s" % (c["id"], d["fits_in_memory"],
                                                               c["fits_in_memory"]))
    unfit = sum(1 for c in cases if not c["fits_in_memory"])
    print("ok: %s: %d cases, %d marked as not fitting" % (summary, len(cases), unfit))


def check_timeline(trace, summary, ranks):
    doc = load(trace)
    traced = set(doc["otherData"]["traced_ranks"])
    pids = {e["pid"] for e in doc["traceEvents"] if e.get("ph") == "X"}
    if pids != traced:
        fail("%s holds ranks %s, its otherData says %s" % (trace, sorted(pids), sorted(traced)))
    drawn = load(summary)["drawn"]
    shown = drawn["ranks"]
    if not set(shown) <= traced:
        fail("ranks %s drawn, the trace holds %s" % (shown, sorted(traced)))
    if ranks and shown != ranks:
        fail("ranks %s drawn, expected %s" % (shown, ranks))
    if drawn["num_gpus"] != doc["otherData"]["num_gpus"]:
        fail("drawn as %s GPUs, the trace says %s" % (drawn["num_gpus"],
                                                      doc["otherData"]["num_gpus"]))
    print("ok: %s: ranks %s of %d GPUs" % (summary, shown, drawn["num_gpus"]))


def check_collective(summary, inputs):
    series = load(summary)["drawn"]["series"]
    for s in series:
        xs = s["bytes"]
        if s["line"] and any(b <= a for a, b in zip(xs, xs[1:])):
            fail("series %r joins points that are not at increasing sizes: %s" % (s["label"], xs))
    want = 0
    for path in inputs:
        doc = load(path)
        if "rows" in doc:
            want += len(doc["rows"])
        else:
            metric = load(summary)["drawn"]["metric_key"]
            want += 2 * sum(1 for p in doc["points"] if p["metric"] == metric and p["bytes"])
    got = sum(len(s["bytes"]) for s in series if not s.get("overlay"))
    if got != want:
        fail("%d points drawn, the inputs hold %d" % (got, want))
    print("ok: %s: %d series, %d points" % (summary, len(series), got))


def main():
    kind, args = sys.argv[1], sys.argv[2:]
    if kind == "sweep":
        check_sweep(args[0], args[1], "--unfit-would-win" in args[2:])
    elif kind == "memory":
        check_memory(args[0], args[1:])
    elif kind == "stages":
        check_stages(args[0], args[1])
    elif kind == "validation":
        check_validation(args[0], args[1])
    elif kind == "timeline":
        check_timeline(args[0], args[1], [int(r) for r in args[2:]])
    elif kind == "collective":
        check_collective(args[0], args[1:])
    else:
        fail("unknown check %r" % kind)


if __name__ == "__main__":
    main()
