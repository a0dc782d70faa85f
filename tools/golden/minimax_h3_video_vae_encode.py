"""Golden vectors for src/models/minimax_h3/vae/video/encoder.ts (diffusers AutoencoderKLMiniMaxH3, the causal 3D CNN
encoder path, and the modular pipeline's encode_vae_condition).

Run in the reference lab from the checkout, with diffusers' src/ outside the repository:
  bash ../shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers/src -- \
    python3 /project/tools/golden/minimax_h3_video_vae_encode.py --out /project/test/fixtures/golden --commit <commit>
Writes minimax_h3/video_vae_encode/<case>.safetensors with
  weight.encoder.*, weight.quant_conv.*  the checkpoint's own keys (decoder weights are not dumped)
  input.pixels             [1, 3, F, H, W] uint8 values (stored as F32) as the pipeline hands them to encode_vae_condition
  input.tiling             [use_tiling, tile_h, tile_w, min_overlap_h, min_overlap_w] (pixels; enable_tiling's arguments)
  input.posterior_noise    [1, C, T, h, w] torch.randn under torch.Generator().manual_seed(42), the draw
                           encode_vae_condition's posterior.sample makes (the test takes it as given)
  output.conv_in, output.down_block.<i>, output.encoder
                           [1, C_i, T_i, H_i, W_i] intermediates of the first encoder call (first clip, first tile);
                           tensors over 8192 values are left out (fixtures stay under 512 KiB)
  output.moments           [1, 2C, T, h, w] the posterior's parameters: quant_conv output, clips concatenated, tiles
                           stitched, token_drop trailing frames dropped (mean | logvar before the clamp)
  output.posterior_sample  mean + exp(0.5 clamp(logvar, -30, 20)) * posterior_noise (float32)
  output.condition_latents encode_vae_condition's result: the sample rounded to float16, (z - latents_mean) / latents_std
The float16 / float64 passes use the same float32 noise (torch draws other values in other dtypes); in the float32
pass the replica is checked to equal upstream's encode_vae_condition bit for bit.
Tiny configs keep the real structure (spatial downsampling at the first levels with the temporal one riding on two of
them, no downsampler at the last levels, GroupNorm per frame, reflect padding, 17-frame clips with 3 dropped tokens);
only widths, depth and the number of levels shrink. Weights ~ N(0, 1/fan_in), biases 0.1 N(0, 1), norm weights
U(0.5, 1.5).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import diffusers_upstream, lowp, pass_dtype, in_f16_pass, record_f16, seed_everything, write_case  # noqa: E402

from diffusers import AutoencoderKLMiniMaxH3  # noqa: E402
from diffusers.modular_pipelines.minimax_h3.encoders import encode_vae_condition  # noqa: E402

MODEL, COMPONENT = "minimax_h3", "video_vae_encode"
REAL_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test", "fixtures", "golden", MODEL,
                           "video_vae", "real-config.json")
PIXEL_MEAN = (0.485, 0.456, 0.406)
PIXEL_STD = (0.229, 0.224, 0.225)
ENCODE_SEED = 42  # components.keyframe_encode_seed
MAX_INTERMEDIATE = 8192

# 4 levels: 2x spatial at levels 0-2 (ratio 8), 2x temporal at levels 1-2 (ratio 4), level 3 widens without a
# downsampler (the real model: 6 levels, spatial at 0-3, temporal at 1-2, 4-5 plain).
TINY = dict(
    in_channels=3, out_channels=3, latent_channels=8, block_out_channels=[8, 8, 8, 16], layers_per_block=1,
    spatial_downsample_factors=[2, 2, 2, 1], temporal_downsample_factors=[1, 2, 2, 1],
    norm_num_groups=4, norm_eps=1e-6, spatial_padding_mode="reflect",
    decoder_num_layers=1, decoder_num_attention_heads=1, decoder_attention_head_dim=16,
    decoder_num_register_tokens=1, decoder_ffn_mult=1, decoder_rope_theta=100.0, decoder_rope_dim_ratio=0.75,
    decoder_norm_eps=1e-5, clip_length=17, token_drop=3,
)
UPSTREAM = ""


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not (name.startswith("encoder.") or name.startswith("quant_conv.")):
                continue
            if "norm" in name and name.endswith("weight"):
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) / p[0].numel() ** 0.5)
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def case(name, seed, frames, height, width, tiling=None, real_stats=False, **over):
    gen = seed_everything(seed)
    cfg = dict(TINY, **over)
    C = cfg["latent_channels"]
    if real_stats:
        with open(REAL_CONFIG) as f:
            real = json.load(f)
        cfg["latents_mean"], cfg["latents_std"] = real["latents_mean"], real["latents_std"]
    else:
        cfg["latents_mean"] = (0.5 * torch.randn(C, generator=gen, dtype=torch.float64)).tolist()
        cfg["latents_std"] = (0.5 + torch.rand(C, generator=gen, dtype=torch.float64)).tolist()
    vae = AutoencoderKLMiniMaxH3(**cfg).eval()
    randomize(vae, gen)
    weights = {k: v for k, v in vae.state_dict().items() if k.startswith("encoder.") or k.startswith("quant_conv.")}
    config = dict(vae.config)
    pixels = torch.randint(0, 256, (1, 3, frames, height, width), generator=gen, dtype=torch.uint8)
    vae = lowp(vae)
    if tiling is None:
        vae.disable_tiling()
        tiling_vec = [0, 0, 0, 0, 0]
    else:
        vae.enable_tiling(*tiling)
        tiling_vec = [1, *tiling]

    captured = {}

    def keep(key):
        def hook(_m, _i, out):
            if key not in captured:
                captured[key] = out.detach().clone()
        return hook

    enc = vae.encoder
    hooks = [enc.conv_in.register_forward_hook(keep("conv_in")), enc.register_forward_hook(keep("encoder"))]
    hooks += [b.register_forward_hook(keep(f"down_block.{i}")) for i, b in enumerate(enc.down_blocks)]
    with torch.no_grad():
        dt = pass_dtype()
        mean_px = torch.tensor(PIXEL_MEAN).view(1, -1, 1, 1, 1)
        std_px = torch.tensor(PIXEL_STD).view(1, -1, 1, 1, 1)
        x = (pixels.to(torch.float32).div(255.0) - mean_px) / std_px  # encode_vae_condition's normalisation
        posterior = vae.encode(x, return_dict=False)[0]
        moments = posterior.parameters
        noise = torch.randn(posterior.mean.shape, generator=torch.Generator().manual_seed(ENCODE_SEED), dtype=torch.float32)
        sample = posterior.mean + posterior.std * noise.to(dt)
        lat_mean = torch.tensor(cfg["latents_mean"]).view(1, -1, 1, 1, 1)
        lat_std = torch.tensor(cfg["latents_std"]).view(1, -1, 1, 1, 1)
        cond = (sample.to(torch.float16).float() - lat_mean) / lat_std
        if not in_f16_pass():
            want = encode_vae_condition(vae, pixels, PIXEL_MEAN, PIXEL_STD, ENCODE_SEED)
            if not torch.equal(want, cond):
                raise SystemExit(f"{name}: the replica of encode_vae_condition differs from upstream's")
    for h in hooks:
        h.remove()
    outputs = {k: v for k, v in captured.items() if v.numel() <= MAX_INTERMEDIATE}
    outputs.update(moments=moments, posterior_sample=sample, condition_latents=cond)
    print(f"{name}: pixels {tuple(pixels.shape)} -> moments {tuple(moments.shape)}; intermediates "
          f"{sorted(k for k in captured if k in outputs)}")
    write_case(ARGS.out, MODEL, COMPONENT, name, weights=weights,
               inputs={"pixels": pixels.float(), "tiling": torch.tensor(tiling_vec, dtype=torch.float32),
                       "posterior_noise": noise},
               outputs=outputs, config=config, upstream=UPSTREAM, seed=seed)


def cases():
    # a keyframe: one frame through the spatial path alone (no clips, no token drop)
    case("one_frame", 11, 1, 16, 24)
    # a keyframe on tiles: 32 x 56 in 24-pixel tiles, min overlap 8 (overlaps 16 down, 8 and 8 across)
    case("one_frame_tiled", 12, 1, 32, 56, (24, 24, 8, 8))
    # 22 = 17 + 5 frames: padded with the last frame to 2 clips of 17, 10 - 3 = 7 latent frames
    case("two_clips", 13, 22, 16, 16)
    # 39 = 2 x 17 + 5 frames: 3 clips, 12 latent frames
    case("three_clips", 14, 39, 16, 16)
    # 17 frames exactly: one clip, 5 - 3 = 2 latent frames (encode() takes any count)
    case("one_clip", 15, 17, 16, 24)
    # 22 frames on tiles across the width (16 x 40 in 16 x 24 tiles, overlap 8)
    case("two_clips_tiled", 16, 22, 16, 40, (16, 24, 8, 8))
    # another config and seed: 3 levels (temporal 2x with spatial 2x at levels 0 and 1, ratio 4), 2 resnets per level,
    # 2 groups, the real 24 latent channels and latents mean/std, 22 frames
    case("other_config", 17, 22, 8, 12, real_stats=True, latent_channels=24, block_out_channels=[8, 8, 16],
         layers_per_block=2, spatial_downsample_factors=[2, 2, 1], temporal_downsample_factors=[2, 2, 1],
         norm_num_groups=2)
    # the trained demo's shape (tools/train-demo/video.py): no resnets at any level (conv_in, the downsamplers,
    # norm_out, conv_out), one norm group, equal widths; 22 frames
    case("no_resnets", 18, 22, 16, 16, block_out_channels=[8, 8, 8, 8], layers_per_block=0, norm_num_groups=1)


def main():
    global ARGS, UPSTREAM
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="58eb52c0803ea9af3abec60841c2a093bdf1f951")
    ARGS = ap.parse_args()
    UPSTREAM = diffusers_upstream(ARGS.commit)
    record_f16(cases)


if __name__ == "__main__":
    main()
