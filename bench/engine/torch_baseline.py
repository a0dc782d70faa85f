"""PyTorch side of `npm run bench:engine`: the same ops at the same shapes, timed the same way (N calls back to
back, one synchronize), so the engine's figures can be printed beside them. Read by bench/engine/torch.ts.

stdin: a JSON list of cases {id, fn, dtype, ...shape}; stdout: one JSON object {id: ms_per_call}.
usage: python3 bench/engine/torch_baseline.py [--device cuda|cpu] [--iters N] < cases.json
"""
import json
import sys
import time

import torch
import torch.nn.functional as F


def make(case, dev):
    dt = {"f32": torch.float32, "f16": torch.float16}[case["dtype"]]
    r = lambda *s: torch.rand(*s, device=dev, dtype=dt) * 2 - 1
    fn = case["fn"]
    if fn == "matmul":
        a, b = r(case["M"], case["K"]), r(case["K"], case["N"])
        return lambda: a @ b
    if fn == "linear":  # x (M, K) times a (N, K) weight, as nn.Linear stores it
        x, w = r(case["M"], case["K"]), r(case["N"], case["K"])
        return lambda: F.linear(x, w)
    if fn == "attention":
        q, k, v = (r(case["B"], case["H"], case["L"], case["D"]) for _ in range(3))
        return lambda: F.scaled_dot_product_attention(q, k, v)
    if fn == "softmax":
        x = r(case["R"], case["C"])
        return lambda: torch.softmax(x, dim=-1)
    if fn == "sum":
        x = r(case["R"], case["C"])
        return lambda: x.sum(dim=-1)
    raise ValueError(f"unknown fn {fn}")


def main():
    dev = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cuda"
    fixed = int(sys.argv[sys.argv.index("--iters") + 1]) if "--iters" in sys.argv else 0
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    out = {}
    for case in json.load(sys.stdin):
        run = make(case, dev)
        run()
        sync()
        iters = fixed or 1
        while True:
            t0 = time.perf_counter()
            for _ in range(iters):
                run()
            sync()
            ms = (time.perf_counter() - t0) * 1000 / iters
            if fixed or ms * iters > 300 or iters >= 1000:
                break
            iters = min(1000, int(400 / max(ms, 0.01)) + 1)
        out[case["id"]] = ms
    json.dump({"device": torch.cuda.get_device_name() if dev == "cuda" else "cpu", "torch": torch.__version__, "ms": out}, sys.stdout)


if __name__ == "__main__":
    main()
