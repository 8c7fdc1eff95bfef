"""What the one-GPU probes (validate/*_probe.py) share: the --json flag, the check for their Python
modules and a CUDA device, and the one JSON object each prints (and writes to --json).

Without a module or a device a probe measures nothing and says why in the object's "reason"; a
failure while setting up its measurement goes to "errors". Either way it exits 0.
"""
import argparse
import importlib
import json


def run(doc: str, record: dict, measure, needs=("torch",), arguments=()) -> int:
    """Parses --json and `arguments` ((flag, add_argument keywords) pairs), imports the modules
    named in `needs` (torch first) and, with a CUDA device, calls measure(args, record, modules),
    modules by name. Prints `record` as JSON and returns 0."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--json", default=None)
    for flag, keywords in arguments:
        ap.add_argument(flag, **keywords)
    args = ap.parse_args()
    record.setdefault("errors", [])
    try:
        modules = {name: importlib.import_module(name) for name in needs}
    except ImportError as e:
        record["reason"] = f"needs {' and '.join(needs)}: {e}"
        modules = None
    if modules is not None:
        torch = modules["torch"]
        if not torch.cuda.is_available():
            record["reason"] = "torch sees no CUDA device"
        else:
            dev = torch.cuda.get_device_properties(0)
            record.update({"device": dev.name, "sm_count": dev.multi_processor_count,
                           "torch": torch.__version__})
            try:
                measure(args, record, modules)
            except Exception as ex:  # the set-up failed: say so in the output
                record["errors"].append(f"set-up: {ex!r}")
    text = json.dumps(record, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0
