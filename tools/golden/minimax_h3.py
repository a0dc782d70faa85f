"""Golden vectors for src/models/minimax_h3 (diffusers MiniMaxH3Transformer3DModel, MiniMaxH3Scheduler and the
modular pipeline's packing / positions / timestep plan).

Run in the reference lab from the checkout, with diffusers' src/ outside the repository:
  bash ../shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers/src -- \
    python3 /project/tools/golden/minimax_h3.py --out /project/test/fixtures/golden --commit <diffusers commit>
Writes minimax_h3/<component>/<case>.safetensors:
  rope/        packed-sequence layout (positions, tags, row indices) from the pipeline's build_packed_sequence, the
               float64 positions bit-exactly (output.position_bits: the 4 little-endian 16-bit words of each
               float64, exact in F32), the rope module's cos/sin and the partial rotation of a random q
  adaln/       timestep embedding, time MLP, every block's AdaLN table and norm_out's shift/scale
  block/       one MiniMaxH3TransformerBlock on a packed sequence with its intermediates
  transformer/ the whole forward (token refiner included) with intermediates
  scheduler/   both schedules (video shift 12, audio shift 3 from the real scheduler configs) and Euler chains
  trajectory/  a 2-step denoising loop of the tiny transformer from fixed noise (the loop of denoise.py)
Weights are re-drawn so activations are O(1): linear weights ~ N(0, 1/fan_in), biases ~ 0.1 N(0, 1), norm weights
~ U(0.5, 1.5). The tiny config keeps the real one's structure: heads * head_dim > hidden, 6 * rope_freq_dim rotated
dims of head_dim (3/4 as 96 of 128), the (1, 2, 2) patch, a 2-layer refiner, f32 in/out projections.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import diffusers_upstream, lowp, record_f16, seed_everything, write_case  # noqa: E402

import diffusers  # noqa: E402
from diffusers import MiniMaxH3Transformer3DModel  # noqa: E402
from diffusers.models.transformers.transformer_minimax_h3 import (  # noqa: E402
    MiniMaxH3RotaryPosEmbed,
    _apply_rotary_emb,
)
from diffusers.modular_pipelines.minimax_h3.before_denoise import (  # noqa: E402
    MiniMaxH3PrepareLayoutStep,
    MiniMaxH3SetTimestepsStep,
    patchify_video_latents,
)
from diffusers.modular_pipelines.minimax_h3.modular_pipeline import (  # noqa: E402
    align_num_frames,
    audio_latent_num_frames,
    video_latent_num_frames,
)
from diffusers.schedulers import MiniMaxH3Scheduler  # noqa: E402

MODEL = "minimax_h3"
CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test", "fixtures", "golden", MODEL, "configs")
VIDEO_TAG, TEXT_TAG, AUDIO_TAG = 0, 1, 2
AUDIO_CHANNELS = 2
SPATIAL = 16  # video VAE spatial compression
FRAMES_PER_CHUNK, LATENTS_PER_CHUNK = 17, 5
KEYFRAME_NOISE_AUG = 0.999
ANCHOR_CODE = {"first": 0, "last": 1}

TINY = dict(
    num_attention_heads=2, attention_head_dim=16, hidden_size=24, num_layers=2, num_refiner_layers=2, ffn_dim=40,
    in_channels=4, audio_in_channels=6, patch_size=[1, 2, 2], text_dim=20, freq_dim=16, time_embed_hidden_dim=24,
    time_embed_dim=16, rope_freq_dim=2, rope_theta=10000.0, norm_eps=1e-5, qk_norm_eps=1e-5, final_norm_eps=1e-5,
)

UPSTREAM = ""
# The released checkpoint's float32 islands (upstream's _keep_in_fp32_modules; Kiln keeps the same ones in f32):
# they stay float32 in the f16 pass.
KEEP = tuple(MiniMaxH3Transformer3DModel._keep_in_fp32_modules)


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight") and p.dim() == 1:
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[1] ** 0.5)
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def build(seed, **over):
    gen = seed_everything(seed)
    cfg = dict(TINY, **over)
    model = MiniMaxH3Transformer3DModel(**cfg).eval()
    randomize(model, gen)
    return cfg, model, gen


def config_json(model):
    return {"_class_name": "MiniMaxH3Transformer3DModel",
            **{k: (list(v) if isinstance(v, tuple) else v) for k, v in model.config.items() if not k.startswith("_")}}


def weights(model, prefix=""):
    return {k: v for k, v in model.state_dict().items() if k.startswith(prefix)}


class Geometry:
    """A request's geometry as the pipeline resolves it: 17k+5 frames, latent sizes, audio latents."""

    def __init__(self, num_frames, height, width, text_tags, anchors=()):
        self.requested_frames = num_frames
        self.num_frames = align_num_frames(num_frames, FRAMES_PER_CHUNK, LATENTS_PER_CHUNK)
        self.height, self.width = height, width
        self.latent_frames = video_latent_num_frames(self.num_frames, FRAMES_PER_CHUNK, LATENTS_PER_CHUNK)
        self.latent_height, self.latent_width = height // SPATIAL, width // SPATIAL
        self.audio_latents = audio_latent_num_frames(self.num_frames)
        self.text_tags = torch.tensor(text_tags, dtype=torch.long)
        self.anchors = tuple(anchors)
        (self.position_ids, self.token_tags, self.video_indices, self.audio_indices, self.text_indices,
         self.num_cond_video, self.num_cond_audio) = MiniMaxH3PrepareLayoutStep.build_packed_sequence(
            self.text_tags, self.latent_frames, self.latent_height, self.latent_width, self.audio_latents,
            (1, 2, 2), AUDIO_CHANNELS, AUDIO_TAG, VIDEO_TAG, self.anchors)

    def inputs(self):
        inputs = {"num_frames": torch.tensor([self.requested_frames]), "height": torch.tensor([self.height]),
                  "width": torch.tensor([self.width]), "text_token_tags": self.text_tags}
        if self.anchors:  # 0 = first latent frame, 1 = last; absent = no keyframes
            inputs["keyframe_anchors"] = torch.tensor([ANCHOR_CODE[a] for a in self.anchors])
        return inputs

    def layout_outputs(self):
        return {
            "num_frames": torch.tensor([self.num_frames]), "num_latent_frames": torch.tensor([self.latent_frames]),
            "num_audio_latents": torch.tensor([self.audio_latents]),
            "position_ids": self.position_ids,
            "position_bits": position_bits(self.position_ids),
            "token_tags": self.token_tags, "video_indices": self.video_indices, "audio_indices": self.audio_indices,
            "text_indices": self.text_indices, "num_condition_video_rows": torch.tensor([self.num_cond_video]),
            "num_condition_audio_rows": torch.tensor([self.num_cond_audio]),
        }

    def timestep_plan(self, video_t, audio_t):
        return MiniMaxH3SetTimestepsStep.build_row_timesteps(
            self.video_indices, self.audio_indices, self.num_cond_video, self.num_cond_audio,
            self.text_indices.numel(), float(video_t), float(audio_t), max(float(video_t), KEYFRAME_NOISE_AUG), 1.0)


def position_bits(p):
    """float64 (L, 3) -> (L, 3, 4) uint16 words, little-endian, as float32 (exact)."""
    words = np.ascontiguousarray(p.numpy().astype("<f8")).view("<u2").reshape(*p.shape, 4)
    return torch.from_numpy(words.astype(np.float32))


def write(component, case, seed, config, *, w=None, i=None, o=None, tolerance=None):
    write_case(ARGS.out, MODEL, component, case, weights=w or {}, inputs=i or {}, outputs=o or {}, config=config,
               upstream=UPSTREAM, seed=seed, tolerance=tolerance)


# ---------------------------------------------------------------------------------------------------- rope
def rope_case(case, seed, geo, rope_freq_dim, q_heads=0, head_dim=128):
    gen = seed_everything(seed)
    rope = MiniMaxH3RotaryPosEmbed(rope_freq_dim=rope_freq_dim, rope_theta=10000.0)
    cos, sin = rope(geo.position_ids)
    outputs = dict(geo.layout_outputs(), cos=cos, sin=sin, inv_freq=rope.inv_freq)
    inputs = geo.inputs()
    if q_heads:
        q = torch.randn(1, geo.position_ids.shape[0], q_heads, head_dim, generator=gen)
        inputs["q"] = q
        outputs["q_rotated"] = _apply_rotary_emb(lowp(q), lowp(cos, f32=True), lowp(sin, f32=True))
    config = dict(TINY, rope_freq_dim=rope_freq_dim, attention_head_dim=head_dim)
    write("rope", case, seed, config, i=inputs, o=outputs)


# ---------------------------------------------------------------------------------------------------- adaln
def adaln_case(case, seed, timesteps, **over):
    _, model, _ = build(seed, **over)
    t = torch.tensor(timesteps, dtype=torch.float32)
    run = lowp(model, KEEP)
    with torch.no_grad():
        proj = run.time_proj(lowp(t, f32=True))
        temb = run.time_embedder(proj.to(run.time_embedder.linear_1.weight.dtype))  # as the forward aligns it
        outputs = {"timestep_proj": proj, "temb": temb}
        for n, block in enumerate(run.transformer_blocks):
            outputs[f"adaln.{n}"] = torch.stack(block.adaln_proj(temb), dim=1)  # (T * 3, 6, hidden)
        lin = run.norm_out.linear(torch.nn.functional.silu(temb).to(run.norm_out.linear.weight.dtype))
        outputs["norm_out.shift"], outputs["norm_out.scale"] = lin.chunk(2, dim=-1)
    w = {k: v for k, v in model.state_dict().items()
         if k.startswith("time_embedder.") or ".adaln_proj." in k or k.startswith("norm_out.linear.")}
    write("adaln", case, seed, config_json(model), w=w, i={"timestep": t}, o=outputs)


# ---------------------------------------------------------------------------------------------------- block
def block_case(case, seed, geo, video_t, audio_t, **over):
    cfg, model, gen = build(seed, **over)
    block = model.transformer_blocks[0]
    timestep, timestep_indices = geo.timestep_plan(video_t, audio_t)
    L = geo.position_ids.shape[0]
    hidden = torch.randn(1, L, cfg["hidden_size"], generator=gen)
    temb = torch.randn(timestep.numel(), cfg["time_embed_dim"], generator=gen)
    adaln_indices = timestep_indices * 3 + geo.token_tags
    cos, sin = model.rope(geo.position_ids)
    inputs = {"hidden_states": hidden, "temb": temb, "adaln_indices": adaln_indices, "cos": cos, "sin": sin}
    block = lowp(block)
    seen = {}
    hooks = [block.norm1.register_forward_hook(lambda m, i, o: seen.__setitem__("norm1", o)),
             block.attn.register_forward_hook(lambda m, i, o: seen.__setitem__("attn", o)),
             block.norm2.register_forward_pre_hook(lambda m, i: seen.__setitem__("after_attn", i[0])),
             block.ff.register_forward_hook(lambda m, i, o: seen.__setitem__("ff", o))]
    with torch.no_grad():
        out = block(lowp(hidden), lowp(temb, f32=True), adaln_indices, lowp((cos, sin), f32=True))
    for h in hooks:
        h.remove()
    outputs = dict(seen, out=out)
    write("block", case, seed, config_json(model), w=weights(model, "transformer_blocks.0."), i=inputs, o=outputs)


# ---------------------------------------------------------------------------------------------------- transformer
def forward_with_intermediates(model, kwargs):
    model = lowp(model, KEEP)
    kwargs = {k: lowp(v, f32=(k == "timestep")) for k, v in kwargs.items()}
    seen = {}
    hooks = [model.token_refiner.register_forward_hook(lambda m, i, o: seen.__setitem__("refiner", o)),
             model.transformer_blocks[0].register_forward_pre_hook(lambda m, a: seen.__setitem__("packed", a[0])),
             model.norm_out.register_forward_hook(lambda m, i, o: seen.__setitem__("norm_out", o))]
    for n, block in enumerate(model.transformer_blocks):
        hooks.append(block.register_forward_hook(lambda m, i, o, n=n: seen.__setitem__(f"block.{n}", o)))
    with torch.no_grad():
        video, audio = model(**kwargs, return_dict=False)
    for h in hooks:
        h.remove()
    return video, audio, seen


def geometry_kwargs(geo):
    return dict(token_tags=geo.token_tags, position_ids=geo.position_ids, video_indices=geo.video_indices,
                audio_indices=geo.audio_indices, text_indices=geo.text_indices)


def transformer_case(case, seed, geo, video_t, audio_t, **over):
    cfg, model, gen = build(seed, **over)
    patch_dim = cfg["in_channels"] * 4
    nv, na, nt = geo.video_indices.numel(), geo.audio_indices.numel(), geo.text_indices.numel()
    video = torch.randn(1, nv, patch_dim, generator=gen)
    audio = torch.randn(1, na, cfg["audio_in_channels"], generator=gen)
    text = torch.randn(1, nt, cfg["text_dim"], generator=gen)
    timestep, timestep_indices = geo.timestep_plan(video_t, audio_t)
    kwargs = dict(hidden_states=video, audio_hidden_states=audio, encoder_hidden_states=text, timestep=timestep,
                  timestep_indices=timestep_indices, **geometry_kwargs(geo))
    v, a, seen = forward_with_intermediates(model, kwargs)
    inputs = dict(geo.inputs(), hidden_states=video, audio_hidden_states=audio, encoder_hidden_states=text,
                  timestep=timestep, timestep_indices=timestep_indices, video_t=torch.tensor([video_t]),
                  audio_t=torch.tensor([audio_t]))
    outputs = dict(geo.layout_outputs(), **seen, sample=v, audio_sample=a)
    write("transformer", case, seed, config_json(model), w=weights(model), i=inputs, o=outputs)


# ---------------------------------------------------------------------------------------------------- scheduler
def load_config(name):
    with open(os.path.join(CONFIGS, name)) as f:
        return json.load(f)


def scheduler_case(steps, seed):
    gen = seed_everything(seed)
    video_cfg, audio_cfg = load_config("scheduler.json"), load_config("audio-scheduler.json")
    outputs, inputs = {}, {}
    sample = torch.randn(7, generator=gen)
    inputs["sample"] = sample
    for name, cfg in (("video", video_cfg), ("audio", audio_cfg)):
        sched = MiniMaxH3Scheduler.from_config(cfg)
        sched.set_timesteps(steps)
        outputs[f"{name}.sigmas"], outputs[f"{name}.timesteps"] = sched.sigmas, sched.timesteps
        velocity = torch.randn(len(sched.timesteps), 7, generator=gen)
        inputs[f"{name}.velocity"] = velocity
        x, chain = sample.clone(), []
        for i, t in enumerate(sched.timesteps):
            x = sched.step(velocity[i], t, x, return_dict=False)[0]
            chain.append(x)
        outputs[f"{name}.samples"] = torch.stack(chain)
    config = {"video": video_cfg, "audio": audio_cfg, "num_inference_steps": steps}
    write("scheduler", f"steps_{steps}", seed, config, i=inputs, o=outputs)


# ---------------------------------------------------------------------------------------------------- trajectory
def trajectory_case(case, seed, geo, steps, **over):
    """The denoise.py loop: one forward per step, the generated rows stepped down their own schedule, the
    conditioning rows never written. `steps` is upstream's num_inference_steps (grid points): a distilled profile's N
    model evaluations are steps = N + 1 (inference_minimax_h3.py of ModelTC/Minimax-H3-Turbo)."""
    cfg, model, gen = build(seed, **over)
    patch_dim = cfg["in_channels"] * 4
    rows_per_frame = (geo.latent_height // 2) * (geo.latent_width // 2)
    text = torch.randn(1, geo.text_indices.numel(), cfg["text_dim"], generator=gen)
    cond = torch.randn(geo.num_cond_video, patch_dim, generator=gen)
    noise = torch.randn(1, cfg["in_channels"], geo.latent_frames, geo.latent_height, geo.latent_width, generator=gen)
    audio_noise = torch.randn(geo.audio_latents * AUDIO_CHANNELS, cfg["audio_in_channels"], generator=gen)
    assert cond.shape[0] == len(geo.anchors) * rows_per_frame
    video_rows = patchify_video_latents(noise, (1, 2, 2))
    latents = torch.cat([cond, video_rows])
    audio_latents = audio_noise.clone()
    video_s = MiniMaxH3Scheduler.from_config(load_config("scheduler.json"))
    audio_s = MiniMaxH3Scheduler.from_config(load_config("audio-scheduler.json"))
    video_s.set_timesteps(steps)
    audio_s.set_timesteps(steps)
    outputs = {"video_rows": video_rows, "video.sigmas": video_s.sigmas, "audio.sigmas": audio_s.sigmas}
    nc = geo.num_cond_video
    run, text_run = lowp(model, KEEP), lowp(text)
    # latents stay float32 in the f16 pass (the pipeline's latents are float32; the model casts at its f32 inputs)
    latents, audio_latents = lowp(latents, f32=True), lowp(audio_latents, f32=True)
    for i, (t, ta) in enumerate(zip(video_s.timesteps, audio_s.timesteps)):
        timestep, timestep_indices = geo.timestep_plan(t, ta)
        with torch.no_grad():
            v, a = run(hidden_states=latents[None], audio_hidden_states=audio_latents[None],
                       encoder_hidden_states=text_run, timestep=lowp(timestep, f32=True), timestep_indices=timestep_indices,
                       return_dict=False, **geometry_kwargs(geo))
        latents[nc:] = video_s.step(v[0, nc:].to(latents.dtype), t, latents[nc:], return_dict=False)[0]
        audio_latents[:] = audio_s.step(a[0].to(latents.dtype), audio_s.timesteps[i], audio_latents, return_dict=False)[0]
        outputs.update({f"step.{i}.timestep": timestep, f"step.{i}.timestep_indices": timestep_indices,
                        f"step.{i}.noise_pred": v, f"step.{i}.audio_noise_pred": a,
                        f"step.{i}.latents": latents.clone(), f"step.{i}.audio_latents": audio_latents.clone()})
    inputs = dict(geo.inputs(), encoder_hidden_states=text, condition_rows=cond, noise=noise, audio_noise=audio_noise,
                  num_inference_steps=torch.tensor([steps]))
    config = dict(config_json(model), scheduler=load_config("scheduler.json"),
                  audio_scheduler=load_config("audio-scheduler.json"))
    write("trajectory", case, seed, config, w=weights(model), i=inputs, o=outputs)


def main():
    global ARGS, UPSTREAM
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", required=True, help="the diffusers commit the sources come from")
    ARGS = ap.parse_args()
    UPSTREAM = diffusers_upstream(ARGS.commit)
    record_f16(cases)


def cases():
    t2va = Geometry(22, 64, 96, [TEXT_TAG] * 5)                      # 7 latent frames of 2x3 rows, 37 audio latents
    vision = [TEXT_TAG] * 3 + [VIDEO_TAG] * 4 + [TEXT_TAG] * 5        # a keyframe's vision tokens inside the text
    fl2va = Geometry(22, 64, 64, vision, ("first", "last"))
    rope_case("t2va_tiny", 1, t2va, rope_freq_dim=16, q_heads=2, head_dim=128)
    rope_case("t2va_5s", 2, Geometry(124, 128, 224, [TEXT_TAG] * 30), rope_freq_dim=2, head_dim=16)
    rope_case("fl2va_17_latent_frames", 3, Geometry(56, 64, 64, vision, ("first", "last")), rope_freq_dim=16)
    rope_case("portrait_unaligned", 4, Geometry(30, 96, 32, [TEXT_TAG] * 3, ("last",)), rope_freq_dim=2, head_dim=16)

    adaln_case("one_timestep", 11, [0.0])
    adaln_case("two_timesteps", 12, [1 - 12 * 0.5 / (1 + 11 * 0.5), 0.25])
    adaln_case("three_timesteps", 13, [0.25, 0.5, 0.999])

    many_runs = Geometry(22, 64, 64, [TEXT_TAG, VIDEO_TAG] * 5 + [TEXT_TAG], ("first",))
    block_case("t2va", 21, t2va, 0.3, 0.6)
    block_case("fl2va", 22, fl2va, 0.3, 0.6)
    block_case("many_runs", 23, many_runs, 0.3, 0.6)

    transformer_case("t2va", 31, t2va, 0.3, 0.6)
    transformer_case("fl2va", 32, fl2va, 0.0, 0.0)

    for n, seed in ((50, 41), (8, 42), (4, 43), (3, 44), (2, 45)):
        scheduler_case(n, seed)

    trajectory_case("t2va_2_steps", 51, t2va, 3)
    trajectory_case("fl2va_2_steps", 52, fl2va, 3)

    # the distilled profiles' schedules (docs/models/minimax-h3.md "Steps per profile"): N model evaluations on
    # linspace(1, 0, N + 1) shifted per modality = num_inference_steps N + 1: 8 (fastvid, turbo_int8), 6 (fastvid_fast),
    # 4 (fastvid_4step_int8)
    for n, seed in ((9, 46), (7, 47), (5, 48)):
        scheduler_case(n, seed)
    trajectory_case("t2va_8_nfe", 53, t2va, 9)
    trajectory_case("fl2va_4_nfe", 54, fl2va, 5)

    # another config and seed for every component (issue 19): 3 heads x 16 over hidden 32, 1 refiner block, FFN 48,
    # 8 video / 4 audio channels, text 12, a wider sinusoid (32) and timestep MLP (20); a 39-frame wide geometry with
    # a last keyframe for the rope, a 22-frame one with vision-tagged text for the rest
    other = dict(num_attention_heads=3, attention_head_dim=16, hidden_size=32, num_layers=2, num_refiner_layers=1,
                 ffn_dim=48, in_channels=8, audio_in_channels=4, text_dim=12, freq_dim=32, time_embed_hidden_dim=20,
                 time_embed_dim=16)
    rope_case("other_geometry_39_frames", 5, Geometry(39, 32, 128, [TEXT_TAG] * 4 + [VIDEO_TAG] * 2 + [TEXT_TAG] * 3,
                                                      ("last",)), rope_freq_dim=16)
    small = Geometry(22, 32, 64, [TEXT_TAG] * 2 + [VIDEO_TAG] * 2 + [TEXT_TAG] * 2, ("last",))
    adaln_case("other_config_two_timesteps", 14, [0.03, 0.999], **other)
    block_case("other_config", 24, small, 0.7, 0.2, **other)
    transformer_case("other_config", 33, small, 0.55, 0.35, **other)
    trajectory_case("other_config_3_nfe", 55, Geometry(22, 32, 64, [TEXT_TAG] * 3), 4, **other)


if __name__ == "__main__":
    main()
