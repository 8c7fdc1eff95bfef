#!/usr/bin/env python3
"""How much a GEMM and an SM-limited copy kernel slow each other on one GPU.

    python3 validate/overlap_probe.py [--json FILE] [--ctas 8,16,24,32]

A stand-in for a compute kernel beside NCCL's: NCCL runs a collective as one CTA per channel
(commonly 8-32 on Hopper) that moves data through HBM, while the GEMM takes the other SMs. For
each CTA count k a copy kernel of k CTAs x 512 threads streams between two 1 GiB buffers in a
grid-stride loop (read + write, 16-byte accesses) on a side stream, and bf16 GEMMs run on the
main stream. Measured with CUDA events:

  gemm_ms        mean time of one GEMM alone, and beside the copy (the copy launched first and
                 long enough to cover every timed GEMM);
  copy_GBps      bytes read + written per second by the copy alone, and beside back-to-back GEMMs
                 (enough GEMMs queued to cover the whole copy);
  mid_stream     per shape, each GEMM of a back-to-back queue timed on its own while a 16-CTA
                 copy is released once the first third of the queue has run: whether compute
                 already running slows when communication arrives, and when the copy gets SMs;
  paced          per shape, 16 CTAs copying with a pause after each 16-byte element (2 and 10 us),
                 which holds the copy near the rate of a collective over the network (tens of
                 GB/s per GPU): the GEMM's slowdown when the SMs are taken but HBM is not.

The ratios answer the question zerosim's engine rests on (sim/core/engine.h, comm_slowdown):
how much longer compute runs while communication is in flight, and how much communication
slows in turn. Only the SM and HBM contention of a real collective is reproduced, not its
NVLink or network traffic. Needs torch and cupy with a CUDA GPU; otherwise it prints the reason
and exits 0. Prints one JSON object (and writes it to --json).
"""
import json
import sys

import probe_report

COPY_SRC = r"""
extern "C" __global__ void stream_copy(const float4* __restrict__ src, float4* __restrict__ dst,
                                       unsigned long long n, int reps) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (int r = 0; r < reps; ++r) {
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
      dst[i] = src[i];
    }
  }
}
"""

PACED_SRC = r"""
extern "C" __global__ void paced_copy(const float4* __restrict__ src, float4* __restrict__ dst,
                                      unsigned long long n, int reps, unsigned int pause_ns) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (int r = 0; r < reps; ++r) {
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
      dst[i] = src[i];
      __nanosleep(pause_ns);
    }
  }
}
"""

THREADS = 512
BUFFER_BYTES = 1 << 30


def main() -> int:
    record = {"probe": "zerosim-overlap-probe/1", "threads_per_cta": THREADS,
              "buffer_bytes": BUFFER_BYTES, "results": [], "mid_stream": [], "paced": []}
    return probe_report.run(__doc__, record, probe, needs=("torch", "cupy"),
                            arguments=[("--ctas", {"default": "8,16,24,32"}),
                                       ("--iters", {"type": int, "default": 20})])


def probe(args, out: dict, modules: dict) -> None:
    torch, cupy = modules["torch"], modules["cupy"]
    out["cupy"] = cupy.__version__
    kernel = cupy.RawKernel(COPY_SRC, "stream_copy")
    paced_kernel = cupy.RawKernel(PACED_SRC, "paced_copy")
    n16 = BUFFER_BYTES // 16
    src = torch.empty(BUFFER_BYTES // 4, device="cuda", dtype=torch.float32).uniform_()
    dst = torch.empty_like(src)
    src_c, dst_c = cupy.asarray(src), cupy.asarray(dst)  # the same memory, as cupy arrays
    side = torch.cuda.Stream()
    main_stream = torch.cuda.current_stream()

    def event():
        return torch.cuda.Event(enable_timing=True)

    def launch_copy(ctas: int, reps: int) -> None:
        with cupy.cuda.ExternalStream(side.cuda_stream):
            kernel((ctas,), (THREADS,), (src_c, dst_c, cupy.uint64(n16), cupy.int32(reps)))

    def copy_alone(ctas: int, reps: int) -> float:
        a, b = event(), event()
        a.record(side)
        launch_copy(ctas, reps)
        b.record(side)
        torch.cuda.synchronize()
        return a.elapsed_time(b)

    shapes = [(8192, 8192, 8192), (4096, 4096, 4096), (16384, 1536, 8192)]
    ctas_list = [int(c) for c in args.ctas.split(",") if c]
    for (m, n, k) in shapes:
        a_mat = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b_mat = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        c_mat = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

        def gemms(count: int):
            s, e = event(), event()
            s.record(main_stream)
            for _ in range(count):
                torch.matmul(a_mat, b_mat, out=c_mat)
            e.record(main_stream)
            return s, e

        for _ in range(5):
            torch.matmul(a_mat, b_mat, out=c_mat)
        torch.cuda.synchronize()
        s, e = gemms(args.iters)
        torch.cuda.synchronize()
        alone_ms = s.elapsed_time(e) / args.iters
        flops = 2.0 * m * n * k
        for ctas in ctas_list:
            row = {"m": m, "n": n, "k": k, "ctas": ctas, "gemm_ms_alone": alone_ms,
                   "gemm_tflops_alone": flops / alone_ms / 1e9}
            try:
                # The copy alone: one pass, then enough passes for ~50 ms.
                one = copy_alone(ctas, 1)
                copy_alone(ctas, 1)
                one = copy_alone(ctas, 1)
                reps_cover = max(1, int(3.0 * alone_ms * args.iters / one) + 1)
                t = copy_alone(ctas, reps_cover)
                row["copy_GBps_alone"] = 2.0 * BUFFER_BYTES * reps_cover / t / 1e6
                # GEMMs beside a copy that outlasts them (launched first).
                torch.cuda.synchronize()
                launch_copy(ctas, reps_cover)
                s, e = gemms(args.iters)
                torch.cuda.synchronize()
                row["gemm_ms_beside"] = s.elapsed_time(e) / args.iters
                row["gemm_slowdown"] = row["gemm_ms_beside"] / alone_ms - 1.0
                # A copy beside GEMMs that outlast it (queued first on the main stream).
                reps_short = max(1, int(0.5 * alone_ms * args.iters / one))
                count = int(3 * reps_short * one / alone_ms) + args.iters
                torch.cuda.synchronize()
                s_g, e_g = gemms(count)
                a_ev, b_ev = event(), event()
                a_ev.record(side)
                launch_copy(ctas, reps_short)
                b_ev.record(side)
                torch.cuda.synchronize()
                row["copy_GBps_beside"] = 2.0 * BUFFER_BYTES * reps_short / a_ev.elapsed_time(b_ev) / 1e6
                row["copy_slowdown"] = row["copy_GBps_alone"] / row["copy_GBps_beside"] - 1.0
            except Exception as ex:  # record and go on: one failure must not lose the rest
                out["errors"].append(f"{m}x{n}x{k} ctas {ctas}: {ex!r}")
            out["results"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        try:
            out["paced"].extend(paced(torch, event, gemms, paced_kernel, src_c, dst_c, n16, side,
                                      m, n, k, alone_ms, args.iters))
        except Exception as ex:
            out["errors"].append(f"{m}x{n}x{k} paced: {ex!r}")
        try:
            out["mid_stream"].append(mid_stream(
                torch, event, lambda: torch.matmul(a_mat, b_mat, out=c_mat), launch_copy,
                copy_alone(16, 1), side, main_stream, m, n, k, alone_ms))
        except Exception as ex:
            out["errors"].append(f"{m}x{n}x{k} mid-stream: {ex!r}")


def paced(torch, event, gemms, paced_kernel, src_c, dst_c, n16, side, m, n, k, alone_ms,
          iters) -> list:
    """16 paced CTAs beside GEMMs: the copy's rate alone over one pass, then the GEMMs beside
    enough passes to outlast them ("covered" says whether they did)."""
    import cupy
    rows = []
    for pause_ns in (2000, 10000):
        def launch(reps: int = 1) -> None:
            with cupy.cuda.ExternalStream(side.cuda_stream):
                paced_kernel((16,), (THREADS,), (src_c, dst_c, cupy.uint64(n16), cupy.int32(reps),
                                                 cupy.uint32(pause_ns)))
        a, b = event(), event()
        torch.cuda.synchronize()
        a.record(side)
        launch()
        b.record(side)
        torch.cuda.synchronize()
        copy_ms = a.elapsed_time(b)
        reps = max(1, int(2.0 * alone_ms * iters / copy_ms) + 1)
        launch(reps)
        s, e = gemms(iters)
        torch.cuda.synchronize()
        beside = s.elapsed_time(e) / iters
        rows.append({"m": m, "n": n, "k": k, "ctas": 16, "pause_ns": pause_ns,
                     "copy_GBps_alone": 2.0 * BUFFER_BYTES / copy_ms / 1e6,
                     "copy_ms_alone": copy_ms, "gemm_ms_alone": alone_ms,
                     "gemm_ms_beside": beside, "gemm_slowdown": beside / alone_ms - 1.0,
                     "covered": reps * copy_ms > beside * iters})
    return rows


def mid_stream(torch, event, gemm, launch_copy, copy_ms, side, main_stream, m, n, k,
               alone_ms) -> dict:
    """Communication that starts while compute is running: GEMMs queued back to back (enough to
    last three times the copy), a 16-CTA copy of one pass released on the side stream once the
    first third of them has ended (the side stream waits on an event). Each GEMM is timed between
    events, and so is the copy: whether the GEMMs running when it arrives slow down (the copy gets
    SMs at once) or the copy waits for SMs until the queue drains."""
    count = max(12, int(3 * copy_ms / alone_ms) + 1)
    release = count // 3
    ends = [event() for _ in range(count + 1)]
    torch.cuda.synchronize()
    ends[0].record(main_stream)
    go = None
    for i in range(count):
        gemm()
        ends[i + 1].record(main_stream)
        if i + 1 == release:
            go = ends[i + 1]
    side.wait_event(go)
    c0, c1 = event(), event()
    c0.record(side)
    launch_copy(16, 1)
    c1.record(side)
    torch.cuda.synchronize()
    gemm_ms = [ends[i].elapsed_time(ends[i + 1]) for i in range(count)]
    return {"m": m, "n": n, "k": k, "ctas": 16, "released_after_gemm": release,
            "gemm_ms_alone": alone_ms, "copy_ms_alone": copy_ms, "gemm_ms": gemm_ms,
            "copy_start_ms": ends[0].elapsed_time(c0), "copy_end_ms": ends[0].elapsed_time(c1)}


if __name__ == "__main__":
    sys.exit(main())
