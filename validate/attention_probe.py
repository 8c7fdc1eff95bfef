#!/usr/bin/env python3
"""Causal attention rates of torch's SDPA backends on one GPU, forward and backward.

    python3 validate/attention_probe.py [--json FILE] [--iters K] [--head-dims 64,96,128]
                                        [--seqs 2048,4096]

bf16, 32 query heads of head dim 128 (a hidden size of 4,096; --head-dims measures other
widths, each row names its own), 32,768 tokens per call split into batch x sequence for
sequences of 2K-32K (--seqs), causal. For each SDPA backend torch offers
(FLASH_ATTENTION: FlashAttention-2; CUDNN_ATTENTION: cuDNN's fused attention, what Transformer
Engine runs on Hopper by default; EFFICIENT_ATTENTION) the forward alone and the forward and
backward together are timed with CUDA events over `iters` calls after 3 warm-ups. FLOPs as
zerosim counts the attention core (sim/model/model.cpp): 4 b s^2 d a forward over the causal band
(half the square), the backward 2.5 times that. Needs torch with a CUDA GPU; otherwise it prints
the reason and exits 0. Prints one JSON object.
"""
import sys

import probe_report


def main() -> int:
    record = {"probe": "zerosim-attention-probe/1", "dtype": "bf16", "heads": 32,
              "tokens": 32768, "causal": True, "rows": []}
    return probe_report.run(__doc__, record, measure, needs=("torch", "torch.nn.attention"),
                            arguments=[("--iters", {"type": int, "default": 10}),
                                       ("--head-dims", {"default": "128"}),
                                       ("--seqs", {"default": "2048,4096,8192,16384,32768"})])


def measure(args, out: dict, modules: dict) -> None:
    torch = modules["torch"]
    F = torch.nn.functional
    SDPBackend = modules["torch.nn.attention"].SDPBackend
    sdpa_kernel = modules["torch.nn.attention"].sdpa_kernel
    heads, tokens = 32, 32768

    def timed(fn) -> float:
        for _ in range(3):
            fn()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        s.record()
        for _ in range(args.iters):
            fn()
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e) / args.iters

    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    shapes = [(d, seq) for d in (int(x) for x in args.head_dims.split(","))
              for seq in (int(x) for x in args.seqs.split(","))]
    for d, seq in shapes:
        b = tokens // seq
        q = torch.randn(b, heads, seq, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn_like(q, requires_grad=True)
        v = torch.randn_like(q, requires_grad=True)
        grad = torch.randn_like(q)
        fwd_flops = 4.0 * b * seq * seq * d * heads / 2  # the causal band
        for name, backend in backends:
            row = {"backend": name, "head_dim": d, "batch": b, "seq": seq}
            try:
                with sdpa_kernel(backend):
                    def forward():
                        with torch.no_grad():
                            F.scaled_dot_product_attention(q, k, v, is_causal=True)

                    def both():
                        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                        o.backward(grad)

                    f_ms = timed(forward)
                    fb_ms = timed(both)
                row.update({"fwd_ms": f_ms, "fwd_bwd_ms": fb_ms, "bwd_ms": fb_ms - f_ms,
                            "fwd_tflops": fwd_flops / f_ms / 1e9,
                            "bwd_tflops": 2.5 * fwd_flops / (fb_ms - f_ms) / 1e9})
            except Exception as ex:  # a backend torch cannot run here: say which and go on
                out["errors"].append(f"{name} seq {seq}: {ex!r}"[:300])
            out["rows"].append(row)
            q.grad = k.grad = v.grad = None


if __name__ == "__main__":
    sys.exit(main())
