"""Shared helpers for the golden-vector generators (run in the reference lab, see shared/spec/models.md).

A generator instantiates an upstream module at a tiny config with a fixed seed, runs it in float32 on the CPU
and writes one safetensors file per case: test/fixtures/golden/<model>/<component>/<case>.safetensors with
  weight.<the checkpoint's own key>   parameters
  input.<name>                        inputs (integer inputs such as token ids and positions are stored as F32:
                                      exact below 2**24, and the engine's reader has no integer dtypes)
  output.<name>                       results and intermediates
and __metadata__ {config (upstream config JSON at its tiny size), upstream (repository + version/commit), seed,
tolerance (JSON: {dtype: {atol, rtol}}), and f16_error (below)}. The test side is test/models/golden.ts.

Upstream's own float16 and float32 errors (the f16 rule of test/models/golden.ts, docs/models/README.md):
`record_f16(run_all)` runs a generator's cases three times. The float16 pass casts every model and float input that
goes through `lowp()` to torch.float16, the float64 pass to torch.float64; both only collect the outputs each
`write_case` would write. The last pass (float32) writes the fixtures and stores, per output present in both:
  __metadata__.f16_error = {name: {"max": max |f16 - f32|, "rms": relative RMS error, "peak": max |f32|}}
  __metadata__.f32_error = the same for the f32 result against the float64 one (how far float32 rounding alone
                           moves upstream's own output: the measure of docs/models/README.md "f32 in the deep conv stacks")
Every seeded draw happens before `lowp()`, in float32, so all passes see the same weights and inputs. With
GOLDEN_WRITE_F64=<dir> the float64 pass also writes its outputs as fixtures under <dir> (for measuring Kiln against
float64; never committed).
"""
import copy
import fnmatch
import json
import math
import os
import random

import numpy as np
import torch
from safetensors.torch import save_file

# Stated tolerances, |got - want| <= atol + rtol * |want| (models.md: 1e-4 relative in f32). f16 has no stated
# tolerance: it follows the float16 rule (test/models/golden.ts F16_RULE) from the f16_error that record_f16 records.
# int8: weight-only symmetric per-channel quantisation rounds each weight by up to 1/254 of its row's largest
# one; through 3 layers of the tiny decoders (residual values up to ~8) the worst element drifts ~0.16, typical
# 0.05-0.09 (measured), so atol 0.2 + 5%: a wrong scale or layout is off by O(1).
DEFAULT_TOLERANCE = {
    "f32": {"atol": 1e-4, "rtol": 1e-4},
    "int8": {"atol": 0.2, "rtol": 0.05},
}


# The pass record_f16 is running: float32 (writing fixtures), float16 or float64 (collecting outputs only).
_PASS = {"dtype": torch.float32, "f16": {}, "f64": {}}


def lowp(x, keep=(), f32=False, inplace=False):
    """x (module, tensor, or a list/tuple/dict of them) at the pass's dtype: unchanged in the float32 pass, cast to
    float16 (float64) in the f16 (f64) pass; a module is deep-copied first (inplace=True casts it in place: modules
    with torch.nn.utils.weight_norm cannot be deep-copied); in the f16 pass submodules whose name
    contains one of `keep` stay float32, as upstream's `_keep_in_fp32_modules`, and so do tensors passed with
    f32=True (values upstream keeps in float32 under a half-precision model: timesteps, RoPE tables, the mixed
    checkpoint's float32 activations). Integer and bool tensors are left alone."""
    dt = _PASS["dtype"]
    if dt == torch.float32 or (f32 and dt == torch.float16):
        return x
    if isinstance(x, torch.nn.Module):
        m = (x if inplace else copy.deepcopy(x)).to(dt)
        if dt == torch.float16:
            for name, sub in m.named_modules():
                if name and any(k in name for k in keep):
                    sub.float()
        return m
    if isinstance(x, torch.Tensor):
        return x.to(dt) if x.is_floating_point() else x
    if isinstance(x, (list, tuple)):
        return type(x)(lowp(v, keep, f32) for v in x)
    if isinstance(x, dict):
        return {k: lowp(v, keep, f32) for k, v in x.items()}
    return x


def in_f16_pass() -> bool:
    """True in a collecting pass (float16 or float64): nothing is written."""
    return _PASS["dtype"] != torch.float32


def pass_dtype() -> torch.dtype:
    return _PASS["dtype"]


def record_f16(run_all, f64: bool = True) -> None:
    """Runs run_all() in the float16 pass and (f64) the float64 pass, collecting outputs, then in the float32 pass
    (writing fixtures with upstream's f16 and f32 errors per output)."""
    _PASS["f16"], _PASS["f64"] = {}, {}
    try:
        for dt in (torch.float16, torch.float64) if f64 else (torch.float16,):
            _PASS["dtype"] = dt
            run_all()
    finally:
        _PASS["dtype"] = torch.float32
    run_all()


def f16_errors(outputs: dict, half: dict, where: str = "") -> dict:
    """Per float output present in both runs: {"max", "rms", "peak"} of the other run (f16, or f32 against f64)
    against the reference one. Integer outputs (tokens, codes) must be equal: a lower-precision run that picks other
    tokens would compare different computations, so such a case is refused (choose one with wider margins)."""
    errs = {}
    for name, want in outputs.items():
        got = half.get(name)
        if got is None or not isinstance(want, torch.Tensor) or got.shape != want.shape:
            continue
        if not want.is_floating_point() or not got.is_floating_point():
            if not torch.equal(want.long(), got.long()):
                raise SystemExit(f"{where}: output {name} (ids) differs between the float32 run and the other precision's")
            continue
        w, g = want.double(), got.double()
        # padding rows a masked attention leaves undefined (NaN in one precision, finite in another) say nothing
        # about precision; an overflow in the f16 run would show in Kiln's f16 result as well, which the test sees
        finite = torch.isfinite(w) & torch.isfinite(g)
        if not bool(finite.all()):
            print(f"  {name}: {int((~finite).sum())} of {finite.numel()} elements not finite in one run; left out")
        w, g = w[finite], g[finite]
        d = (g - w).abs()
        peak = float(w.abs().max()) if w.numel() else 0.0
        sw = float((w * w).sum())
        rms = math.sqrt(float((d * d).sum()) / sw) if sw > 0 else 0.0
        mx = float(d.max()) if d.numel() else 0.0
        errs[name] = {"max": mx, "rms": rms, "peak": peak}
    return errs


def seed_everything(seed: int) -> torch.Generator:
    """Seeds python, numpy and torch; returns a torch.Generator for explicit draws."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    return torch.Generator().manual_seed(seed)


def transformers_upstream() -> str:
    import transformers

    return f"huggingface/transformers {transformers.__version__} (torch {torch.__version__})"


def diffusers_upstream(commit: str) -> str:
    """The upstream stamp of a diffusers-based generator: the commit its sources come from, and the versions run."""
    import diffusers

    return f"huggingface/diffusers {commit} ({diffusers.__version__}, torch {torch.__version__})"


def f32(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(torch.float32).contiguous().clone()


def collect_pass(path: str, outputs: dict, write_f64=None) -> bool:
    """In a collecting pass (float16 / float64) keeps the outputs of the case at `path` for the float32 pass and
    returns True (the caller writes nothing); in the float32 pass returns False. `write_f64(out_dir)` writes the
    float64 outputs as a fixture tree when GOLDEN_WRITE_F64 is set."""
    if not in_f16_pass():
        return False
    key = "f16" if _PASS["dtype"] == torch.float16 else "f64"
    _PASS[key][path] = {k: (v.detach().to(torch.float64 if key == "f64" else torch.float32) if v.is_floating_point()
                            else v.detach()).contiguous().clone()
                        for k, v in outputs.items() if isinstance(v, torch.Tensor)}
    if key == "f64" and os.environ.get("GOLDEN_WRITE_F64") and write_f64:
        _PASS["dtype"] = torch.float32
        try:
            write_f64(os.environ["GOLDEN_WRITE_F64"])
        finally:
            _PASS["dtype"] = torch.float64
    return True


def error_metadata(path: str, outputs: dict) -> dict:
    """f16_error / f32_error of the case at `path` (float32 pass), from what the collecting passes kept."""
    mine = {k: (f32(v) if v.is_floating_point() else v.detach()) for k, v in outputs.items() if isinstance(v, torch.Tensor)}
    meta = {}
    if path in _PASS["f16"]:
        meta["f16_error"] = json.dumps(f16_errors(mine, _PASS["f16"][path], path), sort_keys=True)
    if path in _PASS["f64"]:
        meta["f32_error"] = json.dumps(f16_errors(_PASS["f64"][path], {k: v.double() if v.is_floating_point() else v
                                                                        for k, v in mine.items()}, path), sort_keys=True)
    return meta


def write_case(out_dir: str, model: str, component: str, case: str, *, weights: dict, inputs: dict, outputs: dict,
               config: dict, upstream: str, seed: int, tolerance: dict | None = None, metadata: dict | None = None) -> str:
    """Writes <out_dir>/<model>/<component>/<case>.safetensors; every tensor as float32 (CPU, contiguous). In the f16
    and f64 passes of record_f16 nothing is written: the outputs are kept for the float32 pass's errors."""
    path = os.path.join(out_dir, model, component, f"{case}.safetensors")
    # GOLDEN_ONLY="<model>/<component>/<case> ..." (fnmatch patterns): write only those cases, leaving the others'
    # files as they are (a generator adds a case without rewriting every fixture it makes)
    only = os.environ.get("GOLDEN_ONLY")
    if only and not any(fnmatch.fnmatch(f"{model}/{component}/{case}", pat) for pat in only.split()):
        return path
    if collect_pass(path, outputs, lambda d: write_case(d, model, component, case, weights=weights, inputs=inputs,
                                                        outputs=outputs, config=config, upstream=upstream + " [float64 run]",
                                                        seed=seed, tolerance=tolerance, metadata=metadata)):
        return path
    tensors = {}
    for prefix, group in (("weight.", weights), ("input.", inputs), ("output.", outputs)):
        for name, t in group.items():
            if not isinstance(t, torch.Tensor):
                t = torch.tensor(t)
            tensors[prefix + name] = f32(t)
    meta = {
        "config": json.dumps(config, sort_keys=True),
        "upstream": upstream,
        "seed": str(seed),
        "tolerance": json.dumps(tolerance or DEFAULT_TOLERANCE, sort_keys=True),
        **(metadata or {}),
        **error_metadata(path, outputs),
    }
    os.makedirs(os.path.dirname(path), exist_ok=True)
    save_file(tensors, path, metadata=meta)
    size = os.path.getsize(path)
    print(f"wrote {path} ({size / 1024:.1f} KiB, {len(tensors)} tensors)")
    if size > 512 * 1024:
        raise SystemExit(f"{path}: {size} bytes; keep fixtures under 512 KiB (shrink the config)")
    return path
