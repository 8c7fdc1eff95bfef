#!/usr/bin/env python3
"""Throughput of torch's fused AdamW on one GPU, for comparison with kernels/adam_bench.

    python3 validate/torch_adam.py [--n PARAMS] [--iters K] [--warmup W]

Prints one JSON object. torch.optim.AdamW(fused=True) on one flat fp32 parameter with an fp32
gradient reads p, g, m, v and writes p, m, v: 28 bytes per parameter, the same traffic as
`adam_bench --grad f32 --copy none`. Without torch or without a GPU it prints the reason (and
"torch": null) and exits 0: the comparison is optional.
"""
import argparse
import json
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 28)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print(json.dumps({"torch": None, "reason": "torch is not installed"}))
        return 0
    if not torch.cuda.is_available():
        print(json.dumps({"torch": torch.__version__, "reason": "torch sees no CUDA device"}))
        return 0
    p = torch.zeros(args.n, device="cuda", dtype=torch.float32, requires_grad=True)
    p.grad = torch.full_like(p, 1e-3)
    try:
        opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.01, fused=True)
    except (TypeError, RuntimeError) as e:  # torch without fused AdamW
        print(json.dumps({"torch": torch.__version__, "reason": f"no fused AdamW: {e}"}))
        return 0
    for _ in range(args.warmup):
        opt.step()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(args.iters):
        opt.step()
    stop.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(stop) / args.iters
    bytes_per_param = 28
    print(json.dumps({
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "optimizer": "torch.optim.AdamW(fused=True), fp32 params and grads",
        "params": args.n,
        "ms": ms,
        "params_per_s": args.n / (ms * 1e-3),
        "bytes_per_param": bytes_per_param,
        "GBps": bytes_per_param * args.n / (ms * 1e-3) / 1e9,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
