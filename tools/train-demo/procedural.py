"""The demo's procedural data (issue 18): prompts of a small grammar and the pictures they describe, drawn exactly.

Image grammar: "a <color> <shape> [at the <position>] on a <color> background". The shape is about a quarter of
the short side across, centred at the position's fraction of the frame. The same tables are in
test/api/demo-draws.test.ts, which checks what the service draws against them.
"""
import random

import numpy as np
from PIL import Image, ImageDraw

COLORS = {
    "red": (220, 30, 30), "green": (30, 180, 40), "blue": (30, 60, 220), "yellow": (235, 220, 40),
    "white": (245, 245, 245), "black": (15, 15, 15), "orange": (240, 140, 20), "purple": (140, 40, 170),
}
SHAPES = ("circle", "square", "triangle")
# position word -> (x, y) fraction of the frame; None: the phrase is left out (centre)
POSITIONS = {None: (0.5, 0.5), "center": (0.5, 0.5), "left": (0.25, 0.5), "right": (0.75, 0.5),
             "top": (0.5, 0.25), "bottom": (0.5, 0.75)}
SIZE = 0.25  # of the short side, across


def prompt_of(color: str, shape: str, position: str | None, background: str) -> str:
    where = f" at the {position}" if position else ""
    return f"a {color} {shape}{where} on a {background} background"


def all_prompts() -> list[tuple[str, str, str | None, str]]:
    return [(c, s, p, b) for c in COLORS for s in SHAPES for p in POSITIONS for b in COLORS if b != c]


def draw(color: str, shape: str, position: str | None, background: str, width: int, height: int,
         jitter: random.Random | None = None) -> Image.Image:
    """RGBA picture (alpha 255). `jitter` moves the centre by up to 3% and scales the size by 0.9-1.1 (training
    variety: the model learns the region, not one pixel pattern)."""
    img = Image.new("RGBA", (width, height), COLORS[background] + (255,))
    fx, fy = POSITIONS[position]
    side = SIZE * min(width, height)
    if jitter:
        fx += jitter.uniform(-0.03, 0.03)
        fy += jitter.uniform(-0.03, 0.03)
        side *= jitter.uniform(0.9, 1.1)
    cx, cy, r = fx * width, fy * height, side / 2
    d = ImageDraw.Draw(img)
    fill = COLORS[color] + (255,)
    if shape == "circle":
        d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fill)
    elif shape == "square":
        d.rectangle([cx - r, cy - r, cx + r, cy + r], fill=fill)
    else:
        d.polygon([(cx, cy - r), (cx + r, cy + r), (cx - r, cy + r)], fill=fill)
    return img


def to_tensor_np(img: Image.Image) -> np.ndarray:
    """(4, H, W) float32 in [-1, 1], as VaeImageProcessor.preprocess gives the VAE."""
    return np.asarray(img, dtype=np.float32).transpose(2, 0, 1) / 127.5 - 1.0
