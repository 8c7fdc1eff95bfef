#!/usr/bin/env python3
"""Activation memory of a nanotron-shaped Llama step on one GPU: allocated and reserved.

    python3 validate/memory_probe.py [--json FILE] [--layers L] [--mbs 1,2,4,8]

A Llama decoder written in plain torch the way nanotron's LlamaForTraining runs it at TP 1
(src/nanotron/models/llama.py at 67c5ebb6, the Ultra-Scale Playbook's benchmark branch): an
RMSNorm that keeps its input and 1/rms (its Triton kernel's saved tensors), a fused QKV linear
whose output is permuted into one contiguous q/k/v tensor, K and V concatenated into a second
contiguous tensor (the training path's torch.cat + permute + contiguous; its in-place rotary
keeps nothing), FlashAttention through torch's SDPA, the fused gate/up linear, SiLU(gate) * up,
the down linear, a tied LM head whose logits are cast to fp32, and a cross entropy that keeps
softmax in fp32 as nanotron's sharded_cross_entropy does (its forward holds the shifted logits
and their exponential at once, one fp32 copy more than nanotron's in-place exp). Parameters
bf16; no optimizer (the states do not depend on the micro-batch).

For each micro-batch size two forward/backward steps run; after each step the bf16 .grad are
dropped (nanotron moves them into its fp32 accumulator). Reported per step, above what the
parameters hold: torch.cuda.max_memory_allocated and max_memory_reserved and the caching
allocator's segment count; each size runs twice, with the head and loss and without them (a
first pipeline stage: the last layer's backward fed a random gradient; rows "head": false). Default shape: the playbook's
"1B" (16 layers, hidden 2,048, 32 heads, FFN 8,192, vocab 32,768, sequence 4,096). Needs torch
with a CUDA GPU; otherwise it prints the reason and exits 0. Prints one JSON object.
"""
import sys

import probe_report


def main() -> int:
    record = {"probe": "zerosim-memory-probe/1", "dtype": "bf16", "rows": []}
    return probe_report.run(__doc__, record, measure, needs=("torch",), arguments=[
        ("--layers", {"type": int, "default": 16}),
        ("--hidden", {"type": int, "default": 2048}),
        ("--heads", {"type": int, "default": 32}),
        ("--ffn", {"type": int, "default": 8192}),
        ("--vocab", {"type": int, "default": 32768}),
        ("--seq", {"type": int, "default": 4096}),
        ("--mbs", {"default": "1,2,4,8"}),
    ])


def measure(args, out: dict, modules: dict) -> None:
    torch = modules["torch"]
    F = torch.nn.functional
    h, heads, f, vocab, seq = args.hidden, args.heads, args.ffn, args.vocab, args.seq
    d = h // heads
    out.update({"layers": args.layers, "hidden": h, "heads": heads, "ffn": f, "vocab": vocab,
                "seq": seq, "alloc_conf": __import__("os").environ.get("PYTORCH_CUDA_ALLOC_CONF")})
    bf16 = torch.bfloat16

    class RmsNorm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5)
            ctx.save_for_backward(x, w, rstd)
            return (x.float() * rstd).to(x.dtype) * w

        @staticmethod
        def backward(ctx, g):
            x, w, rstd = ctx.saved_tensors
            xf = x.float()
            xhat = xf * rstd
            gw = (g.float() * xhat).sum(dim=tuple(range(g.dim() - 1))).to(w.dtype)
            gx = g.float() * w.float()
            gx = rstd * (gx - xhat * (gx * xhat).mean(-1, keepdim=True))
            return gx.to(x.dtype), gw

    class CrossEntropy(torch.autograd.Function):
        # nanotron's _ShardedCrossEntropy at tp 1: softmax kept in fp32 and edited in place
        # (nanotron exponentiates the shifted logits in place; here a new tensor, see above).
        @staticmethod
        def forward(ctx, logits, target):
            shifted = logits - logits.max(dim=-1, keepdim=True)[0]
            predicted = shifted.gather(-1, target.unsqueeze(-1)).squeeze(-1)
            exp = torch.exp(shifted)
            del shifted
            total = exp.sum(dim=-1)
            loss = torch.log(total) - predicted
            exp.div_(total.unsqueeze(-1))
            ctx.save_for_backward(exp, target)
            return loss

        @staticmethod
        def backward(ctx, g):
            softmax, target = ctx.saved_tensors
            softmax.scatter_add_(-1, target.unsqueeze(-1),
                                 -torch.ones_like(target, dtype=softmax.dtype).unsqueeze(-1))
            softmax.mul_(g.unsqueeze(-1))
            return softmax, None

    def param(*shape):
        return (torch.randn(*shape, device="cuda", dtype=bf16) * 0.02).requires_grad_()

    embed = param(vocab, h)
    layers = [dict(n1=torch.ones(h, device="cuda", dtype=bf16, requires_grad=True),
                   qkv=param(3 * h, h), o=param(h, h),
                   n2=torch.ones(h, device="cuda", dtype=bf16, requires_grad=True),
                   gate_up=param(2 * f, h), down=param(h, f)) for _ in range(args.layers)]
    final_norm = torch.ones(h, device="cuda", dtype=bf16, requires_grad=True)
    params = [embed, final_norm] + [p for layer in layers for p in layer.values()]

    def decoder(x, p, b):  # x: [seq, b, h], nanotron's layout
        residual = x
        y = RmsNorm.apply(x, p["n1"])
        qkv = F.linear(y, p["qkv"])
        q, k, v = qkv.view(seq, b, 3, heads, d).permute(2, 1, 0, 3, 4).contiguous()
        kv = torch.cat([k.unsqueeze(0), v.unsqueeze(0)], dim=0).permute(1, 2, 0, 3, 4).contiguous()
        k, v = kv[:, :, 0], kv[:, :, 1]
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)
        o = o.transpose(1, 2).contiguous().view(b, seq, h).transpose(0, 1)
        x = F.linear(o, p["o"]) + residual
        residual = x
        y = RmsNorm.apply(x, p["n2"])
        merged = F.linear(y, p["gate_up"])
        gate, up = torch.split(merged, f, dim=-1)
        return F.linear(F.silu(gate) * up, p["down"]) + residual

    def step(b: int, head: bool):
        tokens = torch.randint(0, vocab, (b, seq), device="cuda")
        x = F.embedding(tokens.transpose(0, 1), embed)
        for p in layers:
            x = decoder(x, p, b)
        if head:
            logits = F.linear(RmsNorm.apply(x, final_norm), embed).float()
            loss = CrossEntropy.apply(logits, tokens.transpose(0, 1).contiguous()).mean()
            del logits
            loss.backward()
        else:
            x.backward(torch.randn_like(x))
        for p in params:
            p.grad = None

    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        for head in (True, False):
            for b in [int(s) for s in args.mbs.split(",")]:
                row = {"mbs": b, "head": head}
                try:
                    torch.cuda.synchronize()
                    torch.cuda.empty_cache()
                    base_alloc = torch.cuda.memory_allocated()
                    base_reserved = torch.cuda.memory_reserved()
                    for s in (1, 2):
                        torch.cuda.reset_peak_memory_stats()
                        step(b, head)
                        torch.cuda.synchronize()
                        stats = torch.cuda.memory_stats()
                        row[f"step{s}_alloc_gib"] = (torch.cuda.max_memory_allocated() -
                                                     base_alloc) / 2**30
                        row[f"step{s}_reserved_gib"] = (torch.cuda.max_memory_reserved() -
                                                        base_reserved) / 2**30
                        row[f"step{s}_segments"] = stats.get("segment.all.peak", 0)
                except Exception as ex:  # out of memory at this size: say so and go on
                    out["errors"].append(f"mbs {b} head {head}: {ex!r}"[:300])
                out["rows"].append(row)
    out["param_gib"] = sum(p.numel() for p in params) * 2 / 2**30


if __name__ == "__main__":
    sys.exit(main())
