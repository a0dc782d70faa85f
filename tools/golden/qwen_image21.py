"""Golden vectors for Qwen-Image-2.1's transformer and scheduler (issue 6), from the upstream diffusers code.

Upstream (read, never copied into this repository):
  huggingface/diffusers src/diffusers/models/transformers/transformer_qwenimage21.py @ 9827e152b352
      (not in the stored diffusers snapshot: transcribed outside the repo into a copy of the diffusers tree)
  huggingface/diffusers src/diffusers/schedulers/scheduling_flow_match_euler_discrete.py and
      pipelines/qwenimage/pipeline_qwenimage.py calculate_shift @ 58eb52c0803e (the stored snapshot)
  the sampling loop of src/diffusers/pipelines/qwenimage21/pipeline_qwenimage21.py @ c245e42d101b
      (sigmas, mu, timestep / 1000, prefix KV cache "extract" then "cached", Euler step) is re-stated below.
Run from the checkout, as root:

  cd /work/main && bash /work/shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers-qi21/src -- \
      python3 /project/tools/golden/qwen_image21.py --out /project/test/fixtures/golden

Writes test/fixtures/golden/qwen_image21/<component>/<case>.safetensors (format: shared spec models.md,
"Golden vectors"), every tensor F32:
  rope/        QwenImage21Rope + build_token_metadata: input.img_mask (VLM sequence incl. the target's slots),
               input.img_shapes (N, 3); output.frame/height/width (positions per joint token), output.cos/sin
               (the complex rotary table's real/imaginary parts, (L, pairs)), output.image_ids, output.target_mask
  block/       one QwenImage21TransformerBlock on a joint sequence: input.hidden_states (B, L, D),
               input.modulation (B + 1, 4D) rows [t..., t=0], plus the layout inputs; output.hidden_states
  transformer/ the whole forward (uncached): inputs as the pipeline passes them; output.sample (B, L, C_out) over the
               joint sequence, output.temb, output.modulation, output.block.<i> (joint states after block i)
  scheduler/   FlowMatchEulerDiscreteScheduler.set_timesteps(sigmas=linspace(1, 1/N, N), mu=calculate_shift(seq))
               with Qwen-Image-2.1's reported scheduler config: output.sigmas (N + 1), output.timesteps (N)
  trajectory/  2 denoising steps of the tiny transformer as the pipeline runs them (KV cache on): output.noise_pred.<i>,
               output.latents.<i> (after step i), output.sigmas
Weights are the checkpoint's own keys (the transformer's state dict, no prefix).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import in_f16_pass, lowp, record_f16, seed_everything, write_case  # noqa: E402

import diffusers  # noqa: E402
from diffusers.models.transformers.transformer_qwenimage21 import (  # noqa: E402
    QwenImage21KVCache,
    QwenImage21Rope,
    QwenImage21Transformer2DModel,
)
from diffusers.pipelines.qwenimage.pipeline_qwenimage import calculate_shift  # noqa: E402
from diffusers.schedulers.scheduling_flow_match_euler_discrete import FlowMatchEulerDiscreteScheduler  # noqa: E402

MODEL = "qwen_image21"
UPSTREAM_TRANSFORMER = (f"huggingface/diffusers@9827e152b35265914bb8a49d20a507d0cdbd7e6c "
                        f"transformer_qwenimage21.py (diffusers {diffusers.__version__}, torch {torch.__version__})")
UPSTREAM_SCHEDULER = (f"huggingface/diffusers@58eb52c0803ea9af3abec60841c2a093bdf1f951 "
                      f"scheduling_flow_match_euler_discrete.py + pipeline_qwenimage21.py@c245e42d101b loop "
                      f"(diffusers {diffusers.__version__}, torch {torch.__version__})")

# Reported scheduler/scheduler_config.json of Qwen/Qwen-Image-2.1 (shared/upstream/README.md, "qwen-image-2.1").
SCHEDULER_CONFIG = dict(num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=0.9,
                        base_image_seq_len=256, max_image_seq_len=8192, invert_sigmas=False, shift_terminal=0.02,
                        use_karras_sigmas=False, use_exponential_sigmas=False, use_beta_sigmas=False,
                        time_shift_type="exponential", stochastic_sampling=False)

# The real transformer: dim 4096 = 32 x 128, rope (16, 56, 56), mlp_ratio 3, context 4096, 64 channels, 32 layers.
# Tiny: 2 heads x 24 (rope (4, 10, 10) keeps a short frame axis and equal h/w axes), context 40 != dim, 16 channels.
TINY = dict(patch_size=1, in_channels=16, out_channels=16, num_layers=2, attention_head_dim=24, num_attention_heads=2,
            context_in_dim=40, mlp_ratio=3, axes_dims_rope=(4, 10, 10), eps=1e-6, causal_condition=True)


def randomize(model, gen):
    """Linears ~ U(+-1.5/sqrt(fan_in)), those of the timestep path (time embedder, shared modulation, norm_out scale)
    ~ U(+-2/sqrt(fan_in)), so the modulation is O(1) and tanh gates are neither ~0 nor saturated; QK-norm weights
    ~ U(0.8, 1.6): logits spread over several units, attention far from uniform yet not so sharp that f16 rounding of
    q and k (~5e-4) flips it; the zero-centred text norm weight ~ N(0, 0.3) (its scale is weight + 1)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm_q.weight") or name.endswith("norm_k.weight"):
                p.copy_(0.8 + 0.8 * torch.rand(p.shape, generator=gen))
            elif name.endswith("text_norm.weight"):
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 2:
                gain = 2.0 if name.startswith(("time_text_embed.", "modulation.", "norm_out.")) else 1.5
                p.copy_((torch.rand(p.shape, generator=gen) * 2 - 1) * gain / p.shape[1] ** 0.5)


def build(seed, **over):
    gen = seed_everything(seed)
    cfg = dict(TINY, **over)
    model = QwenImage21Transformer2DModel(**cfg).eval()
    randomize(model, gen)
    return cfg, model, gen


def config_json(model):
    d = {k: v for k, v in dict(model.config).items() if not k.startswith("_")}
    d["axes_dims_rope"] = list(d["axes_dims_rope"])
    return d


def layout(text_runs, ref_shapes, target_shape):
    """img_mask over the VLM sequence (text tokens, one slot per 2x2 latent group of each reference, then the target's
    slots) and img_shapes, from text_runs[i] text tokens before reference i (len(text_runs) = refs + 1: the last run
    follows the last reference)."""
    mask = []
    for i, (_, h, w) in enumerate(ref_shapes):
        mask += [False] * text_runs[i] + [True] * (h * w // 4)
    mask += [False] * text_runs[len(ref_shapes)]
    th, tw = target_shape[1], target_shape[2]
    mask += [True] * (th * tw // 4)
    return torch.tensor([mask]), [tuple(s) for s in ref_shapes] + [tuple(target_shape)]


def shapes_tensor(img_shapes):
    return torch.tensor([list(s) for s in img_shapes], dtype=torch.float32)


# ---------------------------------------------------------------- rope


def rope_case(out, case, seed, axes, text_runs, ref_shapes, target_shape):
    seed_everything(seed)
    img_mask, img_shapes = layout(text_runs, ref_shapes, target_shape)
    repeats = torch.where(img_mask, 4, 1)[0]
    pad_mask = torch.repeat_interleave(img_mask[0], repeats)
    rope = QwenImage21Rope(theta=10000, axes_dim=list(axes))
    table = rope(img_shapes, pad_mask, device=torch.device("cpu"))  # (L, pairs) complex64
    image_ids, target_mask = QwenImage21Transformer2DModel.build_token_metadata(pad_mask, img_shapes)
    frame, height, width = positions_of(img_shapes, pad_mask)
    write_case(out, MODEL, "rope", case, weights={},
               inputs={"img_mask": img_mask.float(), "img_shapes": shapes_tensor(img_shapes)},
               outputs={"cos": table.real, "sin": table.imag, "frame": frame, "height": height, "width": width,
                        "image_ids": image_ids.float(), "target_mask": target_mask.float()},
               config={"axes_dims_rope": list(axes), "theta": 10000}, upstream=UPSTREAM_TRANSFORMER, seed=seed)


def positions_of(img_shapes, pad_mask):
    """The position indices QwenImage21Rope.forward looks up: the same forward over tables whose row r holds the
    position that row stands for (0..8191, then -1024..-1), so the "angles" it returns are the positions."""
    rope = QwenImage21Rope(theta=10000, axes_dim=[2, 2, 2])
    index = torch.cat([torch.arange(8192), torch.arange(1024).flip(0) * -1 - 1]).float()[:, None]
    rope.freqs = [index, index, index]
    pos = rope(img_shapes, pad_mask, device=torch.device("cpu"))  # (L, 3)
    return [pos[:, 0], pos[:, 1], pos[:, 2]]


# ---------------------------------------------------------------- block and transformer


def transformer_inputs(gen, cfg, batch, text_runs, ref_shapes, target_shape, emb_scale=3.0):
    img_mask, img_shapes = layout(text_runs, ref_shapes, target_shape)
    img_mask = img_mask.expand(batch, -1).contiguous()
    n_vlm = img_mask.shape[1] - (target_shape[1] * target_shape[2]) // 4
    n_img = sum(s[1] * s[2] for s in img_shapes)
    latents = torch.randn(batch, n_img, cfg["in_channels"], generator=gen)
    enc = emb_scale * torch.randn(batch, n_vlm, cfg["context_in_dim"], generator=gen)
    return img_mask, img_shapes, latents, enc


def capture_blocks(model):
    got = {}
    hooks = []
    for i, blk in enumerate(model.transformer_blocks):
        def pre(_m, args, kwargs, i=i):
            got[f"in.{i}"] = kwargs["hidden_states"].detach().clone()
            got[f"mod.{i}"] = kwargs["modulation"].detach().clone()
            got[f"kwargs.{i}"] = dict(kwargs)
        def post(_m, _a, _k, out, i=i):
            got[f"out.{i}"] = out.detach().clone()
        hooks.append(blk.register_forward_pre_hook(pre, with_kwargs=True))
        hooks.append(blk.register_forward_hook(post, with_kwargs=True))
    return got, hooks


def capture_temb(model):
    got = {}
    h = model.time_text_embed.register_forward_hook(lambda _m, _i, out: got.__setitem__("temb", out.detach().clone()))
    return got, h


def layout_inputs(img_mask, img_shapes, timestep):
    return {"img_mask": img_mask.float(), "img_shapes": shapes_tensor(img_shapes), "timestep": timestep}


def transformer_case(out, case, seed, batch, text_runs, ref_shapes, target_shape, timestep, **over):
    cfg, model, gen = build(seed, **over)
    img_mask, img_shapes, latents, enc = transformer_inputs(gen, cfg, batch, text_runs, ref_shapes, target_shape)
    t = torch.full((batch,), timestep)
    run = lowp(model)
    blocks, hooks = capture_blocks(run)
    temb, h2 = capture_temb(run)
    with torch.no_grad():
        sample = run(hidden_states=lowp(latents), encoder_hidden_states=lowp(enc), timestep=lowp(t),
                     img_shapes=[img_shapes] * batch, img_mask=img_mask, return_dict=False)[0]
    for h in hooks + [h2]:
        h.remove()
    outputs = {"sample": sample, "temb": temb["temb"], "modulation": blocks["mod.0"], "block_input": blocks["in.0"]}
    for i in range(cfg["num_layers"]):
        outputs[f"block.{i}"] = blocks[f"out.{i}"]
    inputs = dict(layout_inputs(img_mask, img_shapes, t), hidden_states=latents, encoder_hidden_states=enc)
    write_case(out, MODEL, "transformer", case, weights=dict(model.state_dict()), inputs=inputs, outputs=outputs,
               config=config_json(model), upstream=UPSTREAM_TRANSFORMER, seed=seed)


def block_case(out, case, seed, batch, text_runs, ref_shapes, target_shape, timestep, **over):
    """One block of a 1-layer model, fed by the model's own forward so the joint input and the modulation are what
    upstream builds; the fixture stores them as the block's inputs. The f16 pass runs the block alone in float16 on
    those (float32) inputs, as the test does."""
    cfg, model, gen = build(seed, num_layers=1, **over)
    img_mask, img_shapes, latents, enc = transformer_inputs(gen, cfg, batch, text_runs, ref_shapes, target_shape)
    t = torch.full((batch,), timestep)
    blocks, hooks = capture_blocks(model)
    with torch.no_grad():
        model(hidden_states=latents, encoder_hidden_states=enc, timestep=t, img_shapes=[img_shapes] * batch,
              img_mask=img_mask, return_dict=False)
    for h in hooks:
        h.remove()
    if in_f16_pass():
        with torch.no_grad():
            blocks["out.0"] = lowp(model.transformer_blocks[0])(**lowp(blocks["kwargs.0"]))
    weights = {k: v for k, v in model.state_dict().items() if k.startswith("transformer_blocks.0.")}
    inputs = dict(layout_inputs(img_mask, img_shapes, t), hidden_states=blocks["in.0"], modulation=blocks["mod.0"])
    write_case(out, MODEL, "block", case, weights=weights, inputs=inputs,
               outputs={"hidden_states": blocks["out.0"]}, config=config_json(model), upstream=UPSTREAM_TRANSFORMER,
               seed=seed)


# ---------------------------------------------------------------- scheduler and trajectory


def make_scheduler():
    return FlowMatchEulerDiscreteScheduler(**SCHEDULER_CONFIG)


def schedule(scheduler, steps, image_seq_len):
    """The pipeline's step 4: sigmas = linspace(1, 1/N, N), mu from the target's token count."""
    sigmas = np.linspace(1.0, 1 / steps, steps)
    c = scheduler.config
    mu = calculate_shift(image_seq_len, c.get("base_image_seq_len", 256), c.get("max_image_seq_len", 4096),
                         c.get("base_shift", 0.5), c.get("max_shift", 1.15))
    scheduler.set_timesteps(sigmas=sigmas, device="cpu", mu=mu)
    return mu


def scheduler_case(out, case, steps, height, width):
    seq = (height // 16) * (width // 16)
    sch = make_scheduler()
    mu = schedule(sch, steps, seq)
    write_case(out, MODEL, "scheduler", case, weights={},
               inputs={"steps": torch.tensor([steps]), "image_seq_len": torch.tensor([seq]),
                       "height": torch.tensor([height]), "width": torch.tensor([width])},
               outputs={"sigmas": sch.sigmas, "timesteps": sch.timesteps, "mu": torch.tensor([mu], dtype=torch.float64)},
               config=dict(sch.config), upstream=UPSTREAM_SCHEDULER, seed=0,
               tolerance={"f32": {"atol": 1e-6, "rtol": 1e-6}})


def trajectory_case(out, case, seed, text_runs, ref_shapes, target_shape, steps=2, **over):
    """The pipeline's denoising loop (batch 1, cfg off, use_kv_cache=True) for `steps` steps."""
    cfg, model, gen = build(seed, **over)
    img_mask, img_shapes, latents_all, enc = transformer_inputs(gen, cfg, 1, text_runs, ref_shapes, target_shape)
    n_target = target_shape[1] * target_shape[2]
    refs = latents_all[:, :-n_target] if ref_shapes else None
    latents = latents_all[:, -n_target:]
    sch = make_scheduler()
    schedule(sch, steps, n_target)
    sch.set_begin_index(0)
    cache = QwenImage21KVCache(len(model.transformer_blocks))
    outputs = {"sigmas": sch.sigmas, "timesteps": sch.timesteps}
    run, enc_run, refs_run, latents = lowp(model), lowp(enc), lowp(refs), lowp(latents)
    inputs = dict(layout_inputs(img_mask, img_shapes, torch.tensor([0.0])), encoder_hidden_states=enc,
                  latents=latents, steps=torch.tensor([steps]))
    del inputs["timestep"]
    if refs is not None:
        inputs["reference_latents"] = refs
    with torch.no_grad():
        for i, t in enumerate(sch.timesteps):
            mode = "extract" if i == 0 else "cached"
            x = latents if refs is None else torch.cat([refs_run, latents], dim=1)
            timestep = t.expand(latents.shape[0]).to(latents.dtype)
            pred = run(hidden_states=x, timestep=timestep / 1000, encoder_hidden_states=enc_run,
                         encoder_hidden_states_mask=None, img_shapes=[img_shapes], img_mask=img_mask,
                         kv_cache=cache, kv_cache_mode=mode, return_dict=False)[0]
            pred = pred[:, -latents.size(1):]
            latents = sch.step(pred, t, latents, return_dict=False)[0]
            outputs[f"noise_pred.{i}"] = pred
            outputs[f"latents.{i}"] = latents
    write_case(out, MODEL, "trajectory", case, weights=dict(model.state_dict()), inputs=inputs, outputs=outputs,
               config={"transformer": config_json(model), "scheduler": dict(sch.config)},
               upstream=UPSTREAM_TRANSFORMER + "; " + UPSTREAM_SCHEDULER, seed=seed)


# Another config (issue 19's new cases): 3 heads x 16, rope (4, 6, 6), context 24, 8 channels, mlp_ratio 2, 3 layers.
OTHER = dict(attention_head_dim=16, num_attention_heads=3, axes_dims_rope=(4, 6, 6), context_in_dim=24, in_channels=8,
             out_channels=8, mlp_ratio=2)


def main(out):
    # rope: text only before the target; references with text between; two adjacent references (one run of slots,
    # two blocks); odd-free but non-square shapes (h != w, so max(h, w) and the centred grids differ); real axes.
    rope_case(out, "t2i", 1, (4, 10, 10), [5], [], (1, 4, 6))
    rope_case(out, "refs_text_between", 2, (4, 10, 10), [3, 2, 4], [(1, 2, 4), (1, 4, 2)], (1, 6, 4))
    rope_case(out, "refs_adjacent", 3, (4, 10, 10), [3, 0, 2], [(1, 2, 2), (1, 4, 6)], (1, 2, 8))
    rope_case(out, "real_axes", 4, (16, 56, 56), [7, 3], [(1, 2, 6)], (1, 4, 4))
    rope_case(out, "long_text", 5, (4, 10, 10), [2000], [], (1, 10, 12))

    block_case(out, "t2i", 11, 1, [5], [], (1, 4, 6), 0.73)
    block_case(out, "refs", 12, 1, [3, 2, 4], [(1, 2, 4), (1, 4, 2)], (1, 4, 4), 0.41)
    block_case(out, "batch2_refs_adjacent", 13, 2, [3, 0, 2], [(1, 2, 2), (1, 2, 4)], (1, 2, 6), 0.9)

    transformer_case(out, "t2i", 21, 1, [6], [], (1, 4, 6), 0.73)
    transformer_case(out, "refs", 22, 1, [3, 2, 4], [(1, 2, 4), (1, 4, 2)], (1, 4, 4), 0.41)
    transformer_case(out, "batch2_refs_adjacent", 23, 2, [3, 0, 2], [(1, 2, 2), (1, 2, 4)], (1, 2, 6), 0.9)
    transformer_case(out, "no_causal_condition", 24, 1, [4, 3], [(1, 2, 2)], (1, 4, 4), 0.55, causal_condition=False)

    for steps, (h, w) in [(25, (1024, 1024)), (40, (2048, 2048)), (25, (256, 256)), (2, (512, 768)), (50, (1536, 2752)),
                          (8, (4096, 4096)), (3, (128, 128))]:
        scheduler_case(out, f"steps{steps}_{w}x{h}", steps, h, w)

    trajectory_case(out, "t2i", 31, [6], [], (1, 4, 6))
    trajectory_case(out, "refs", 32, [3, 2, 4], [(1, 2, 4), (1, 4, 2)], (1, 4, 4))

    # other configs and seeds
    rope_case(out, "other_axes_8_12_12", 6, (8, 12, 12), [4, 1, 0], [(1, 6, 2), (1, 2, 2)], (1, 6, 8))
    block_case(out, "other_config_refs", 14, 1, [2, 5], [(1, 4, 4)], (1, 2, 4), 0.18, **OTHER)
    transformer_case(out, "other_config_two_refs", 25, 1, [1, 0, 3], [(1, 2, 2), (1, 4, 2)], (1, 4, 2), 0.62,
                     num_layers=3, **OTHER)
    scheduler_case(out, "steps13_1184x864", 13, 864, 1184)
    trajectory_case(out, "other_config_3_steps", 33, [5, 2], [(1, 2, 4)], (1, 2, 2), steps=3, **OTHER)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="fixture root (test/fixtures/golden)")
    a = ap.parse_args()
    record_f16(lambda: main(a.out))
