"""Loss curves of the video demo's training (video.py) as a small png, drawn with PIL (plot.py's panels):

  python3 tools/train-demo/video_plot.py --work /tmp/train/h3 --out docs/images/demo-video-losses.png

Panels: the video VAE's loss (and its decoder-only stage's, if it ran), the audio VAE's, and the transformer's video and audio losses over its runs one after
the other (dit_losses.json; a run with a ball weight logs the weighted video loss; sigma-1 runs and flow runs see
different losses, so the curve jumps where a run changes its sigmas)."""
import argparse
import json
import os

from PIL import Image

from plot import H, W, panel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    panels = []
    for name, title in (("vae_losses.json", "video VAE (L1 + MSE, pixels in [0, 1])"),
                        ("audio_vae_losses.json", "audio VAE (L1 + multi-resolution STFT)")):
        p = os.path.join(a.work, name)
        if os.path.exists(p):
            d = json.load(open(p))
            panels.append(panel(d["losses"], title))
            if d.get("decoder_losses"):  # --stage vae_decoder: the decoder alone on the frozen encoder's latents
                panels.append(panel(d["decoder_losses"], "video VAE decoder alone (L1 + MSE)"))
    p = os.path.join(a.work, "dit_losses.json")
    if os.path.exists(p):
        runs = json.load(open(p))["runs"]
        video = [l[0] for r in runs for l in r["losses"]]
        audio = [l[1] for r in runs for l in r["losses"]]
        kinds = "+".join(f"{len(r['losses'])} {r['sigmas']}" for r in runs)
        panels.append(panel(video, f"transformer, video ({kinds})"))
        panels.append(panel(audio, "transformer, audio"))
    img = Image.new("RGB", (W * 2, H * ((len(panels) + 1) // 2)), "white")
    for i, im in enumerate(panels):
        img.paste(im, ((i % 2) * W, (i // 2) * H))
    img.save(a.out, optimize=True)
    print(f"wrote {a.out} ({len(panels)} panels)")


if __name__ == "__main__":
    main()
