"""Golden 2-step trajectory with 4 keyframes (issue 15: "a 2-step trajectory with keyframes"; the 2-keyframe FL2VA
ones are minimax_h3/trajectory/fl2va_*): the tiny MiniMax H3 transformer of minimax_h3.py (diffusers
MiniMaxH3Transformer3DModel at 58eb52c0, the same network ComfyUI's MiniMaxH3Model runs) on ComfyUI's PackedLayout for
guides at frames 0, 13, 25, 38 of 39 (comfy/ldm/minimax/model.py at 01a56b76, the excerpt outside the repository that
minimax_h3_keyframes.py uses), row timesteps from diffusers' build_row_timesteps (guides at max(t, 0.999), as ComfyUI's
seg_t), denoise.py's loop: only the generated rows stepped, the keyframe rows never written.

Run in the reference lab:
  bash ../shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers/src -u comfyui=/opt/upstream/comfyui-h3 -- \
    python3 /project/tools/golden/minimax_h3_guides_trajectory.py --out /project/test/fixtures/golden
Writes minimax_h3/trajectory_guides/<case>.safetensors: the transformer's weights; input.num_frames/height/width,
text_token_tags, guide_frames, encoder_hidden_states, condition_rows, noise, audio_noise, num_inference_steps;
output.step.<i>.{timestep, timestep_indices, noise_pred, audio_noise_pred, latents, audio_latents}.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minimax_h3 as h3  # noqa: E402
from common import diffusers_upstream, lowp, record_f16, write_case  # noqa: E402

from comfy_h3_layout import PackedLayout  # noqa: E402
from diffusers.modular_pipelines.minimax_h3.before_denoise import MiniMaxH3SetTimestepsStep, patchify_video_latents  # noqa: E402
from diffusers.modular_pipelines.minimax_h3.modular_pipeline import audio_latent_num_frames, video_latent_num_frames  # noqa: E402
from diffusers.schedulers import MiniMaxH3Scheduler  # noqa: E402

VIDEO_TAG, TEXT_TAG, AUDIO_TAG = 0, 1, 2


def case(name, seed, frames, height, width, text_tags, guide_frames, steps):
    cfg, model, gen = h3.build(seed)
    C, A = cfg["in_channels"], cfg["audio_in_channels"]
    latent_t = video_latent_num_frames(frames, 17, 5)
    lat_h, lat_w = height // 16, width // 16
    audio_t = audio_latent_num_frames(frames)
    keyframes = [{"resolved_frame_index": f, "latent": torch.zeros(1, C, 1, lat_h, lat_w)} for f in guide_frames]
    layout = PackedLayout(len(text_tags), latent_t, lat_h, lat_w, audio_t, keyframes=keyframes)
    tags = torch.empty(layout.seq_len, dtype=torch.long)
    for a, b, kind in layout.segments:
        tags[a:b] = torch.tensor(text_tags) if kind == "text" else (AUDIO_TAG if kind == "audio" else VIDEO_TAG)
    vid, aud = layout.img_pos, layout.audio_pos
    txt = torch.arange(len(text_tags))
    ncv = int((~layout.img_update).sum())
    cond_latents = [torch.randn(1, C, 1, lat_h, lat_w, generator=gen) for _ in guide_frames]
    cond = torch.cat([patchify_video_latents(x, (1, 2, 2)) for x in cond_latents])
    assert cond.shape[0] == ncv
    text = torch.randn(1, len(text_tags), cfg["text_dim"], generator=gen)
    noise = torch.randn(1, C, latent_t, lat_h, lat_w, generator=gen)
    audio_noise = torch.randn(audio_t * 2, A, generator=gen)
    latents = torch.cat([cond, patchify_video_latents(noise, (1, 2, 2))])
    audio_latents = audio_noise.clone()
    video_s = MiniMaxH3Scheduler.from_config(h3.load_config("scheduler.json"))
    audio_s = MiniMaxH3Scheduler.from_config(h3.load_config("audio-scheduler.json"))
    video_s.set_timesteps(steps)
    audio_s.set_timesteps(steps)
    outputs = {}
    run, text_run = lowp(model, h3.KEEP), lowp(text)
    latents, audio_latents = lowp(latents, f32=True), lowp(audio_latents, f32=True)
    geo = dict(token_tags=tags, position_ids=layout.position_ids, video_indices=vid, audio_indices=aud, text_indices=txt)
    for i, (t, ta) in enumerate(zip(video_s.timesteps, audio_s.timesteps)):
        timestep, timestep_indices = MiniMaxH3SetTimestepsStep.build_row_timesteps(
            vid, aud, ncv, 0, txt.numel(), float(t), float(ta), max(float(t), h3.KEYFRAME_NOISE_AUG), 1.0)
        with torch.no_grad():
            v, a = run(hidden_states=latents[None], audio_hidden_states=audio_latents[None], encoder_hidden_states=text_run,
                       timestep=lowp(timestep, f32=True), timestep_indices=timestep_indices, return_dict=False, **geo)
        latents[ncv:] = video_s.step(v[0, ncv:].to(latents.dtype), t, latents[ncv:], return_dict=False)[0]
        audio_latents[:] = audio_s.step(a[0].to(latents.dtype), audio_s.timesteps[i], audio_latents, return_dict=False)[0]
        outputs.update({f"step.{i}.timestep": timestep, f"step.{i}.timestep_indices": timestep_indices,
                        f"step.{i}.noise_pred": v, f"step.{i}.audio_noise_pred": a,
                        f"step.{i}.latents": latents.clone(), f"step.{i}.audio_latents": audio_latents.clone()})
    inputs = {"num_frames": torch.tensor([frames]), "height": torch.tensor([height]), "width": torch.tensor([width]),
              "text_token_tags": torch.tensor(text_tags), "guide_frames": torch.tensor(guide_frames),
              "encoder_hidden_states": text, "condition_rows": cond, "noise": noise, "audio_noise": audio_noise,
              "num_inference_steps": torch.tensor([steps])}
    config = dict(h3.config_json(model), scheduler=h3.load_config("scheduler.json"),
                  audio_scheduler=h3.load_config("audio-scheduler.json"))
    write_case(ARGS.out, "minimax_h3", "trajectory_guides", name, weights=h3.weights(model), inputs=inputs,
               outputs=outputs, config=config, upstream=UPSTREAM, seed=seed)


def main():
    global ARGS, UPSTREAM
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="58eb52c0803ea9af3abec60841c2a093bdf1f951")
    ARGS = ap.parse_args()
    UPSTREAM = (diffusers_upstream(ARGS.commit) + " MiniMaxH3Transformer3DModel on ComfyUI PackedLayout "
                "(Comfy-Org/ComfyUI 01a56b76 comfy/ldm/minimax/model.py)")
    vision = [TEXT_TAG] * 2 + [VIDEO_TAG] * 3 + [TEXT_TAG] * 4
    record_f16(lambda: case("four_keyframes_2_steps", 71, 39, 64, 64, vision, [0, 13, 25, 38], 3))


if __name__ == "__main__":
    main()
