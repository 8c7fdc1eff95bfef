#!/usr/bin/env python3
"""bf16 GEMM times of Megatron layer shapes on one GPU, forward and backward.

    python3 validate/gemm_probe.py [--json FILE] [--iters K]

For hidden h in 1024, 2048, 4096, 8192, tokens per micro-batch s*b in 2048, 8192, 16384 and tensor
parallelism t in 1, 2, 4, 8: a GPT layer's four linears on one TP rank (QKV [h -> 3h/t], the
attention output [h/t -> h], the MLP's [h -> 4h/t] and [4h/t -> h]), each as zerosim names it in
`zerosim plan` (forward m x n x k, C[m x n] = A[m x k] B[k x n]) and as its backward runs: dgrad
[m x k] = [m x n][n x k] and wgrad [k x n] = [k x m][m x n]. Each is timed with CUDA events over
`iters` back-to-back products after 3 warm-ups, inputs random in [-1, 1). zerosim prices a backward
GEMM at its forward shape's rate (sim/cost/compute_cost.cpp); this measures both. Needs torch
with a CUDA GPU; otherwise it prints the reason and exits 0. Prints one JSON object.
"""
import sys

import probe_report


def main() -> int:
    record = {"probe": "zerosim-gemm-probe/1", "dtype": "bf16", "rows": []}
    return probe_report.run(__doc__, record, measure,
                            arguments=[("--iters", {"type": int, "default": 20})])


def measure(args, out: dict, modules: dict) -> None:
    torch = modules["torch"]

    def time_ms(m: int, n: int, k: int) -> float:
        a = torch.rand(m, k, device="cuda", dtype=torch.bfloat16) * 2 - 1
        b = torch.rand(k, n, device="cuda", dtype=torch.bfloat16) * 2 - 1
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        for _ in range(3):
            torch.matmul(a, b, out=c)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(args.iters):
            torch.matmul(a, b, out=c)
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e) / args.iters

    for h in (1024, 2048, 4096, 8192):
        for tokens in (2048, 8192, 16384):
            for t in (1, 2, 4, 8):
                linears = {"qkv": (3 * h // t, h), "attn_out": (h, h // t),
                           "mlp_up": (4 * h // t, h), "mlp_down": (h, 4 * h // t)}
                for name, (n, k) in linears.items():
                    m = tokens
                    row = {"hidden": h, "tokens": tokens, "tp": t, "linear": name,
                           "m": m, "n": n, "k": k}
                    try:
                        for part, (pm, pn, pk) in (("fwd", (m, n, k)), ("dgrad", (m, k, n)),
                                                   ("wgrad", (k, n, m))):
                            ms = time_ms(pm, pn, pk)
                            row[part + "_ms"] = ms
                            row[part + "_tflops"] = 2.0 * m * n * k / ms / 1e9
                    except Exception as ex:  # record and go on
                        out["errors"].append(f"{name} h {h} tokens {tokens} tp {t}: {ex!r}")
                    out["rows"].append(row)


if __name__ == "__main__":
    sys.exit(main())
