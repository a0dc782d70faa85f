"""Shared helpers for the golden-vector generators (run in the reference lab, see shared/spec/models.md).

A generator instantiates an upstream module at a tiny config with a fixed seed, runs it in float32 on the CPU
and writes one safetensors file per case: test/fixtures/golden/<model>/<component>/<case>.safetensors with
  weight.<the checkpoint's own key>   parameters
  input.<name>                        inputs (integer inputs such as token ids and positions are stored as F32:
                                      exact below 2**24, and the engine's reader has no integer dtypes)
  output.<name>                       results and intermediates
and __metadata__ {config (upstream config JSON at its tiny size), upstream (repository + version/commit), seed,
tolerance (JSON: {dtype: {atol, rtol}})}. The test side is test/models/golden.ts.
"""
import json
import os
import random

import numpy as np
import torch
from safetensors.torch import save_file

# Stated tolerances, |got - want| <= atol + rtol * |want| (models.md: 1e-4 relative in f32, 1e-2 in f16).
# int8: weight-only symmetric per-channel quantisation rounds each weight by up to 1/254 of its row's largest
# one; through 3 layers of the tiny decoders (residual values up to ~8) the worst element drifts ~0.16, typical
# 0.05-0.09 (measured), so atol 0.2 + 5%: a wrong scale or layout is off by O(1).
DEFAULT_TOLERANCE = {
    "f32": {"atol": 1e-4, "rtol": 1e-4},
    "f16": {"atol": 1e-2, "rtol": 1e-2},
    "int8": {"atol": 0.2, "rtol": 0.05},
}


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


def write_case(out_dir: str, model: str, component: str, case: str, *, weights: dict, inputs: dict, outputs: dict,
               config: dict, upstream: str, seed: int, tolerance: dict | None = None) -> str:
    """Writes <out_dir>/<model>/<component>/<case>.safetensors; every tensor as float32 (CPU, contiguous)."""
    tensors = {}
    for prefix, group in (("weight.", weights), ("input.", inputs), ("output.", outputs)):
        for name, t in group.items():
            if not isinstance(t, torch.Tensor):
                t = torch.tensor(t)
            tensors[prefix + name] = f32(t)
    metadata = {
        "config": json.dumps(config, sort_keys=True),
        "upstream": upstream,
        "seed": str(seed),
        "tolerance": json.dumps(tolerance or DEFAULT_TOLERANCE, sort_keys=True),
    }
    path = os.path.join(out_dir, model, component, f"{case}.safetensors")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    save_file(tensors, path, metadata=metadata)
    size = os.path.getsize(path)
    print(f"wrote {path} ({size / 1024:.1f} KiB, {len(tensors)} tensors)")
    if size > 512 * 1024:
        raise SystemExit(f"{path}: {size} bytes; keep fixtures under 512 KiB (shrink the config)")
    return path
