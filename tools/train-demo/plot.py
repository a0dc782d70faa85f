"""Loss curves of a demo training run as a small png (no plotting library in the lab: drawn with PIL).

  python3 tools/train-demo/plot.py --work /tmp/train/qi21 --out docs/images/demo-image-losses.png
Each panel: the loss per step (light) and its 50-step running mean (dark), log scale: the VAE's, and the
transformer's stages one after the other (dit_losses_stage1.json, _stage2 ..., then dit_losses.json; a stage with a
shape weight logs the weighted loss)."""
import argparse
import json
import math
import os

from PIL import Image, ImageDraw

W, H, PAD = 420, 220, 36


def panel(losses: list[float], title: str) -> Image.Image:
    img = Image.new("RGB", (W, H), "white")
    d = ImageDraw.Draw(img)
    logs = [math.log10(max(v, 1e-6)) for v in losses]
    lo, hi = math.floor(min(logs)), math.ceil(max(logs))
    hi = hi if hi > lo else lo + 1
    x = lambda i: PAD + (W - 2 * PAD) * i / max(1, len(losses) - 1)  # noqa: E731
    y = lambda v: H - PAD - (H - 2 * PAD) * (v - lo) / (hi - lo)  # noqa: E731
    d.rectangle([PAD, PAD, W - PAD, H - PAD], outline="black")
    for e in range(lo, hi + 1):
        d.line([PAD, y(e), W - PAD, y(e)], fill=(225, 225, 225))
        d.text((4, y(e) - 6), f"1e{e}", fill="black")
    d.line([(x(i), y(v)) for i, v in enumerate(logs)], fill=(170, 190, 230))
    run = [sum(logs[max(0, i - 49):i + 1]) / len(logs[max(0, i - 49):i + 1]) for i in range(len(logs))]
    d.line([(x(i), y(v)) for i, v in enumerate(run)], fill=(20, 40, 140), width=2)
    d.text((PAD, 10), title, fill="black")
    d.text((W - PAD - 60, H - PAD + 8), f"{len(losses)} steps", fill="black")
    return img


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    panels = []
    vae = os.path.join(a.work, "vae_losses.json")
    if os.path.exists(vae):
        panels.append(panel(json.load(open(vae))["losses"], "VAE: L1 + MSE + 1e-4 KL"))
    # the transformer's stages in order (each run's dit_losses.json kept as _stageN before the next resumes)
    dit = []
    for name in [f"dit_losses_stage{i}.json" for i in range(1, 10)] + ["dit_losses.json"]:
        p = os.path.join(a.work, name)
        if os.path.exists(p):
            dit += json.load(open(p))["losses"]
    if dit:
        panels.append(panel(dit, "transformer + text layers: flow-matching MSE (shape-weighted stages: weighted)"))
    out = Image.new("RGB", (W * len(panels), H), "white")
    for i, p in enumerate(panels):
        out.paste(p, (i * W, 0))
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    out.save(a.out, optimize=True)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
