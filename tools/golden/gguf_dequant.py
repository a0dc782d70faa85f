"""GGUF dequantisation reference vectors: random blocks of each quantised type and gguf-py's own dequantisation of them.

gguf-py (the `gguf` package of llama.cpp, gguf/quants.py) implements ggml's dequantize_row_* in numpy; its output is
the reference the engine's CPU dequantiser (src/engine/gguf.ts) is checked against in test/engine/gguf.test.ts. The
blocks are random bytes with the fp16 scale fields (d, and m / dmin where the type has one) set to random finite
values, so every bit pattern of the quantised values is exercised and no scale is NaN or infinite.

    pip install --target <dir> --no-deps gguf==0.19.0   # with numpy
    PYTHONPATH=<dir> python3 tools/golden/gguf_dequant.py > test/fixtures/golden/gguf/dequant.json
"""
import base64
import json
import sys

import numpy as np
import gguf
from gguf.quants import dequantize

# type -> (values per block, bytes per block, offsets of fp16 scale fields)
TYPES = {
    "Q8_0": (32, 34, [0]),
    "Q4_0": (32, 18, [0]),
    "Q4_1": (32, 20, [0, 2]),
    "Q5_0": (32, 22, [0]),
    "Q5_1": (32, 24, [0, 2]),
    "Q4_K": (256, 144, [0, 2]),
    "Q5_K": (256, 176, [0, 2]),
    "Q6_K": (256, 210, [208]),
}
BLOCKS = 6


def main() -> None:
    rng = np.random.default_rng(20261203)
    out = {"upstream": "gguf-py 0.19.0 (pip gguf), gguf.quants.dequantize", "blocks": BLOCKS, "types": {}}
    for name, (qk, bs, scales) in TYPES.items():
        raw = rng.integers(0, 256, size=(BLOCKS, bs), dtype=np.uint8)
        for off in scales:
            v = (rng.uniform(0.25, 2.0, size=BLOCKS) * 2.0 ** rng.integers(-8, 1, size=BLOCKS) * rng.choice([-1, 1], size=BLOCKS)).astype(np.float16)
            raw[:, off:off + 2] = v.view(np.uint8).reshape(BLOCKS, 2)
        qtype = getattr(gguf.GGMLQuantizationType, name)
        values = dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
        assert values.size == BLOCKS * qk and np.isfinite(values).all()
        out["types"][name] = {
            "blocks": base64.b64encode(raw.tobytes()).decode(),
            "values": base64.b64encode(values.astype("<f4").tobytes()).decode(),
        }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
