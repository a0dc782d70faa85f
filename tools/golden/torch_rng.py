"""Golden vectors for src/models/common/torch-rng.ts: torch.rand and torch.randn (float32, CPU) under
torch.Generator().manual_seed(seed), the draws upstream makes where Kiln must match them (MiniMax H3's
encode_vae_condition samples the keyframe posterior under seed 42).

Run in the reference lab:
  bash ../shared/tools/reflab/run.sh -- python3 /project/tools/golden/torch_rng.py --out /project/test/fixtures/golden
Writes torch/rng/<case>.safetensors: output.uniform = torch.rand(n), output.normal = torch.randn(n), each from a fresh
generator seeded `seed`; config {seed, n, cpu_capability}.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import write_case  # noqa: E402


def case(name, seed, n):
    uniform = torch.rand(n, generator=torch.Generator().manual_seed(seed))
    normal = torch.randn(n, generator=torch.Generator().manual_seed(seed))
    config = {"seed": seed, "n": n, "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    write_case(ARGS.out, "torch", "rng", name, weights={}, inputs={}, outputs={"uniform": uniform, "normal": normal},
               config=config, upstream=f"pytorch torch.rand / torch.randn (torch {torch.__version__})", seed=seed)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ARGS = ap.parse_args()
    case("seed42_40", 42, 40)  # a tail that is not a multiple of 16: the last 16 are drawn again
    case("seed42_keyframe_latent", 42, 24 * 24 * 42)  # a 384 x 672 keyframe's latent (24 channels, 24 x 42)
    case("seed7_1000", 7, 1000)
    case("seed1234_16", 1234, 16)


if __name__ == "__main__":
    main()
