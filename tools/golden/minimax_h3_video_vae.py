"""Golden vectors for src/models/minimax_h3/vae/video (diffusers AutoencoderKLMiniMaxH3, the ViT3D decoder path).

Run in the reference lab from the checkout, with diffusers' src/ outside the repository:
  bash ../shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers/src -- \
    python3 /project/tools/golden/minimax_h3_video_vae.py --out /project/test/fixtures/golden --commit <diffusers commit>
Writes minimax_h3/video_vae/<case>.safetensors with
  weight.post_quant_conv.*, weight.decoder.*      the checkpoint's own keys (encoder weights are not dumped)
  input.latents            [1, 24, T, h, w] normalised latents as the sampler hands them over
  input.tiling             [use_tiling, tile_h, tile_w, min_overlap_h, min_overlap_w] (pixels; upstream's
                           enable_tiling arguments, 256/64 in the released model)
  output.post_quant_conv   [1, 24, T', h', w'] (first decoder call only: first clip, first tile)
  output.patch_embed       [1, N, D] after decoder.proj_in
  output.block0            [1, N + R + 1, D] after transformer block 0 (registers and the zero token appended)
  output.unpatchify_in     [1, N, 3 * pt * p * p] after proj_out, before un-patchify
  output.decoded           [1, 3, F, H, W] vae.decode of the de-normalised latents (ImageNet-normalised pixels)
  output.video             [1, 3, F, H, W] (one_clip only) the pipeline's decode step: * pixel_std + pixel_mean, clamp(0, 1)
The tiny config keeps the real structure: 24 latent channels with the real latents_mean/std, temporal ratio 4
with clip_length 17 and token_drop 3 (so the 5-token chunks, 2-token overlap and 5-frame cross-fade are the real
ones), rope_dim_ratio 0.75, 4 register tokens; only the spatial ratio (4 instead of 16), widths and depth shrink.
Weights are re-drawn so activations are O(1): linear weights ~ N(0, 1/fan_in), biases ~ 0.1 N(0, 1), norm
weights and the residual scales ~ U(0.5, 1.5), register tokens ~ N(0, 1).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import diffusers_upstream, lowp, record_f16, seed_everything, write_case  # noqa: E402

from diffusers import AutoencoderKLMiniMaxH3  # noqa: E402

MODEL, COMPONENT = "minimax_h3", "video_vae"
# a verbatim copy of the released vae/config.json (MiniMax-AI/MiniMax-H3 @ 8d8824ef, shared/upstream/minimax-h3)
REAL_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test", "fixtures", "golden", MODEL,
                           COMPONENT, "real-config.json")
# ImageNet mean/std: the pipeline's pixel convention (modular_pipelines/minimax_h3 components.pixel_mean/std).
PIXEL_MEAN = (0.485, 0.456, 0.406)
PIXEL_STD = (0.229, 0.224, 0.225)

TINY = dict(
    in_channels=3, out_channels=3, latent_channels=24, block_out_channels=[8, 8, 8, 8, 8, 8], layers_per_block=1,
    spatial_downsample_factors=[2, 2, 1, 1, 1, 1], temporal_downsample_factors=[1, 2, 2, 1, 1, 1],
    norm_num_groups=4, norm_eps=1e-6, spatial_padding_mode="reflect",
    decoder_num_layers=2, decoder_num_attention_heads=2, decoder_attention_head_dim=16,
    decoder_num_register_tokens=4, decoder_ffn_mult=4, decoder_rope_theta=100.0, decoder_rope_dim_ratio=0.75,
    decoder_norm_eps=1e-5, clip_length=17, token_drop=3,
)
UPSTREAM = ""


def real_latent_stats():
    with open(REAL_CONFIG) as f:
        cfg = json.load(f)
    return cfg["latents_mean"], cfg["latents_std"]


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("encoder.") or name.startswith("quant_conv."):
                continue
            if name.endswith("register_tokens"):
                p.copy_(torch.randn(p.shape, generator=gen))
            elif ("norm" in name and name.endswith("weight")) or name.endswith(("scale1", "scale2")):
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif p.dim() >= 2:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=gen) / fan_in ** 0.5)
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def case(name, seed, frames, height, width, tiling=None, with_video=False, **over):
    gen = seed_everything(seed)
    mean, std = real_latent_stats()
    cfg = dict(TINY, latents_mean=mean, latents_std=std, **over)
    vae = AutoencoderKLMiniMaxH3(**cfg).eval()
    randomize(vae, gen)
    weights = {k: v for k, v in vae.state_dict().items()
               if k.startswith("decoder.") or k.startswith("post_quant_conv.")}
    config = dict(vae.config)
    vae = lowp(vae)  # the f16 pass: plain float16 weights and activations, as Kiln's f16 decode
    if tiling is None:
        vae.disable_tiling()
        tiling_vec = [0, 0, 0, 0, 0]
    else:
        vae.enable_tiling(*tiling)
        tiling_vec = [1, *tiling]

    latents = torch.randn(1, 24, frames, height, width, generator=gen)
    captured = {}

    def keep(key, fn=lambda o: o):
        def hook(_m, _i, out):
            if key not in captured:
                captured[key] = fn(out).detach().clone()
        return hook

    hooks = [
        vae.post_quant_conv.register_forward_hook(keep("post_quant_conv")),
        vae.decoder.proj_in.register_forward_hook(keep("patch_embed")),
        vae.decoder.transformer_blocks[0].register_forward_hook(keep("block0")),
        vae.decoder.proj_out.register_forward_hook(keep("proj_out")),
    ]
    with torch.no_grad():
        m = torch.tensor(mean).view(1, -1, 1, 1, 1)
        s = torch.tensor(std).view(1, -1, 1, 1, 1)
        decoded = vae.decode(lowp(latents * s + m), return_dict=False)[0]
        video = (decoded.float() * torch.tensor(PIXEL_STD).view(1, -1, 1, 1, 1)
                 + torch.tensor(PIXEL_MEAN).view(1, -1, 1, 1, 1)).clamp(0, 1)
    for h in hooks:
        h.remove()
    n = captured["patch_embed"].shape[1]
    outputs = {
        "post_quant_conv": captured["post_quant_conv"],
        "patch_embed": captured["patch_embed"],
        "block0": captured["block0"],
        "unpatchify_in": captured["proj_out"][:, :n],
        "decoded": decoded,
    }
    if with_video:  # pointwise of decoded: one case is enough (fixtures stay under 512 KiB)
        outputs["video"] = video
    write_case(ARGS.out, MODEL, COMPONENT, name, weights=weights,
               inputs={"latents": latents, "tiling": torch.tensor(tiling_vec, dtype=torch.float32)},
               outputs=outputs, config=config, upstream=UPSTREAM, seed=seed)


def main():
    global ARGS, UPSTREAM
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", required=True, help="the diffusers commit the sources come from")
    ARGS = ap.parse_args()
    UPSTREAM = diffusers_upstream(ARGS.commit)
    record_f16(cases)


def cases():
    case("one_clip", 1, 7, 3, 4, with_video=True)            # 7 latent frames = 22 pixel frames: one chunk, one clip
    case("two_chunks", 2, 12, 2, 3)           # 12 = 5*2 + 2: two chunks cross-faded over 5 frames
    case("padded_tail", 3, 9, 2, 2)           # 9 is not 5k + 2: the tail is padded and cut off again
    case("tiled", 4, 7, 4, 6, (12, 12, 4, 4))  # 16x24 pixels in 12x12 tiles: overlaps 8 (h), 8 and 4 (w)
    case("tiled_chunks", 5, 12, 3, 6, (8, 12, 4, 4))  # 12x24 in 8x12 tiles over two temporal chunks
    # another config and seed (issue 19): one block of 2 heads x 24 (18 rotated dims), 2 registers, FFN x2
    case("other_config", 6, 7, 2, 3, decoder_num_layers=1, decoder_num_attention_heads=2, decoder_attention_head_dim=24,
         decoder_num_register_tokens=2, decoder_ffn_mult=2, with_video=True)


if __name__ == "__main__":
    main()
