#!/usr/bin/env python3
"""Checks an image a plot script wrote and, given one, the --summary JSON it wrote beside it
(plots/_common.py layout()): the image is not blank; every text lies inside the image, uncut by
its axes and clear of every other text; tick labels along one axis and legend entries do not
repeat; every axis with tick labels has a label; an axis names at most one time unit, its tick
labels none, and no axis scales its ticks by an offset ("1e6") that its label would not show.

    check_plot.py IMAGE [SUMMARY.json]
"""

import itertools
import json
import re
import sys

TIME_UNITS = {"ps", "ns", "\u00b5s", "us", "ms", "s", "min", "h"}
TIME_TOKEN = re.compile(r"(?<![A-Za-z\u00b5])(ps|ns|\u00b5s|us|ms|s|min|h)(?![A-Za-z])")


def fail(image, message):
    sys.exit("FAIL: %s: %s" % (image, message))


def image_pixels(path):
    """(width, height) of a PNG after checking it is big enough and not one colour; None for an
    SVG (checked to be one)."""
    if path.endswith(".svg"):
        with open(path, encoding="utf-8") as f:
            if "<svg" not in f.read():
                fail(path, "not an SVG")
        return None
    import matplotlib.image as image
    a = image.imread(path)
    if a.shape[0] < 200 or a.shape[1] < 200:
        fail(path, "image too small: %s" % (a.shape,))
    if a.std() <= 0.01:
        fail(path, "image is blank")
    return a.shape[1], a.shape[0]


def time_units(label):
    """The time units a label names in parentheses: "step time (s)" -> {"s"}; a rate such as
    "(GB/s)" names none."""
    return {g.strip() for g in re.findall(r"\(([^()]*)\)", label) if g.strip() in TIME_UNITS}


def overlap(a, b, tol):
    return min(a[2], b[2]) - max(a[0], b[0]) > tol and min(a[3], b[3]) - max(a[1], b[1]) > tol


def check_layout(image, doc, pixels):
    w, h = doc["size"]
    dpi = doc["dpi"]
    tol = 1.0 / dpi  # one pixel
    if pixels and (abs(w * dpi - pixels[0]) > 2 or abs(h * dpi - pixels[1]) > 2):
        fail(image, "the summary's frame (%.0f x %.0f px) is not the image's (%d x %d)" %
             (w * dpi, h * dpi, pixels[0], pixels[1]))
    texts = doc["texts"]
    for t in texts:
        x0, y0, x1, y1 = t["extent"]
        if x0 < -tol or y0 < -tol or x1 > w + tol or y1 > h + tol:
            fail(image, "%s %r runs off the image" % (t["role"], t["text"]))
        if t["clipped"]:
            fail(image, "%s %r is cut by its axes" % (t["role"], t["text"]))
        if t["role"] in ("xoffset", "yoffset"):
            fail(image, "an axis scales its ticks by %r, which its label does not say" % t["text"])
    for a, b in itertools.combinations(texts, 2):
        if overlap(a["extent"], b["extent"], tol):
            fail(image, "%s %r overlaps %s %r" % (a["role"], a["text"], b["role"], b["text"]))
    for i, ax in enumerate(doc["axes"]):
        for role in ("xtick", "ytick", "legend"):
            repeated = sorted({v for v in ax[role] if ax[role].count(v) > 1})
            if repeated:
                fail(image, "axes %d: %s labels repeat: %s" % (i, role, repeated))
        for axis in "xy":
            label, ticks = ax[axis + "label"], ax[axis + "tick"]
            if ticks and not label.strip():
                fail(image, "axes %d: the %s axis has tick labels but no label" % (i, axis))
            units = time_units(label)
            if len(units) > 1:
                fail(image, "axes %d: %s label %r names %s" % (i, axis, label, sorted(units)))
            if units:
                for tick in ticks:
                    if TIME_TOKEN.search(tick):
                        fail(image, "axes %d: tick %r names a unit beside the label's %r" %
                             (i, tick, label))


def main():
    image = sys.argv[1]
    pixels = image_pixels(image)
    if len(sys.argv) > 2:
        with open(sys.argv[2], encoding="utf-8") as f:
            doc = json.load(f)
        check_layout(image, doc, pixels)
    print("ok: %s%s" % (image, " %dx%d" % pixels if pixels else ""))


if __name__ == "__main__":
    main()
