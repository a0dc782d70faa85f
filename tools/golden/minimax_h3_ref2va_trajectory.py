"""Golden 2-step trajectory of a reference request (issue 15: "one with references + a voice"): the tiny MiniMax H3
transformer of minimax_h3.py (diffusers MiniMaxH3Transformer3DModel at 58eb52c0) denoising from fixed noise on the
Ref2VA layout (MiniMaxH3Ref2VAPrepareLayoutStep.build_ref2va_packed_sequence: two images and a voice), the rows'
timesteps from MiniMaxH3SetTimestepsStep.build_row_timesteps (references at max(t, 0.999) and 1.0), the loop of
denoise.py: one forward per step, only the generated video and audio rows stepped down their schedules, the reference
rows (noised image rows, clean voice rows) never written.

Run in the reference lab:
  bash ../shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers/src -- \
    python3 /project/tools/golden/minimax_h3_ref2va_trajectory.py --out /project/test/fixtures/golden
Writes minimax_h3/trajectory_ref2va/<case>.safetensors: the transformer's weights; input.num_frames/height/width,
text_token_tags, references ([R, 5] as minimax_h3_references.py), encoder_hidden_states, condition_rows (the image
references' rows), audio_condition_rows (the voice's rows, channel-major), noise, audio_noise, num_inference_steps;
output.step.<i>.{timestep, timestep_indices, noise_pred, audio_noise_pred, latents, audio_latents}.
"""
import argparse
import os
import sys
from types import SimpleNamespace

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minimax_h3 as h3  # noqa: E402
from common import diffusers_upstream, lowp, record_f16, write_case  # noqa: E402

from diffusers.modular_pipelines.minimax_h3.before_denoise import (  # noqa: E402
    MiniMaxH3Ref2VAPrepareLayoutStep,
    MiniMaxH3SetTimestepsStep,
    patchify_video_latents,
)
from diffusers.modular_pipelines.minimax_h3.modular_pipeline import audio_latent_num_frames, video_latent_num_frames  # noqa: E402
from diffusers.schedulers import MiniMaxH3Scheduler  # noqa: E402

VIDEO_TAG, TEXT_TAG, AUDIO_TAG = 0, 1, 2


def case(name, seed, frames, height, width, text_tags, refs, steps):
    cfg, model, gen = h3.build(seed)
    C, A = cfg["in_channels"], cfg["audio_in_channels"]
    latent_t = video_latent_num_frames(frames, 17, 5)
    lat_h, lat_w = height // 16, width // 16
    audio_t = audio_latent_num_frames(frames)
    references, cond_latents, audio_rows, table = [], [], [], []
    for r in refs:
        if r[0] == "image":
            references.append(SimpleNamespace(kind="image", has_audio=False))
            cond_latents.append(torch.randn(1, C, 1, r[1], r[2], generator=gen))
            table.append([0, 1, r[1], r[2], 0])
        else:
            references.append(SimpleNamespace(kind="audio", has_audio=True))
            audio_rows.append(torch.randn(2 * r[1], A, generator=gen))
            table.append([1, 0, 0, 0, r[1]])
    tags = torch.tensor(text_tags, dtype=torch.long)
    pos, token_tags, vid, aud, txt, ncv, nca = MiniMaxH3Ref2VAPrepareLayoutStep.build_ref2va_packed_sequence(
        tags, references, cond_latents, audio_rows, latent_t, lat_h, lat_w, audio_t, (1, 2, 2), 2, AUDIO_TAG, VIDEO_TAG)
    cond = torch.cat([patchify_video_latents(x, (1, 2, 2)) for x in cond_latents])
    audio_cond = torch.cat(audio_rows)
    assert cond.shape[0] == ncv and audio_cond.shape[0] == nca
    text = torch.randn(1, txt.numel(), cfg["text_dim"], generator=gen)
    noise = torch.randn(1, C, latent_t, lat_h, lat_w, generator=gen)
    audio_noise = torch.randn(audio_t * 2, A, generator=gen)
    latents = torch.cat([cond, patchify_video_latents(noise, (1, 2, 2))])
    audio_latents = torch.cat([audio_cond, audio_noise])
    video_s = MiniMaxH3Scheduler.from_config(h3.load_config("scheduler.json"))
    audio_s = MiniMaxH3Scheduler.from_config(h3.load_config("audio-scheduler.json"))
    video_s.set_timesteps(steps)
    audio_s.set_timesteps(steps)
    outputs = {}
    run, text_run = lowp(model, h3.KEEP), lowp(text)
    latents, audio_latents = lowp(latents, f32=True), lowp(audio_latents, f32=True)
    geo = dict(token_tags=token_tags, position_ids=pos, video_indices=vid, audio_indices=aud, text_indices=txt)
    for i, (t, ta) in enumerate(zip(video_s.timesteps, audio_s.timesteps)):
        timestep, timestep_indices = MiniMaxH3SetTimestepsStep.build_row_timesteps(
            vid, aud, ncv, nca, txt.numel(), float(t), float(ta), max(float(t), h3.KEYFRAME_NOISE_AUG), 1.0)
        with torch.no_grad():
            v, a = run(hidden_states=latents[None], audio_hidden_states=audio_latents[None], encoder_hidden_states=text_run,
                       timestep=lowp(timestep, f32=True), timestep_indices=timestep_indices, return_dict=False, **geo)
        latents[ncv:] = video_s.step(v[0, ncv:].to(latents.dtype), t, latents[ncv:], return_dict=False)[0]
        audio_latents[nca:] = audio_s.step(a[0, nca:].to(latents.dtype), audio_s.timesteps[i], audio_latents[nca:], return_dict=False)[0]
        outputs.update({f"step.{i}.timestep": timestep, f"step.{i}.timestep_indices": timestep_indices,
                        f"step.{i}.noise_pred": v, f"step.{i}.audio_noise_pred": a,
                        f"step.{i}.latents": latents.clone(), f"step.{i}.audio_latents": audio_latents.clone()})
    inputs = {"num_frames": torch.tensor([frames]), "height": torch.tensor([height]), "width": torch.tensor([width]),
              "text_token_tags": tags, "references": torch.tensor(table), "encoder_hidden_states": text,
              "condition_rows": cond, "audio_condition_rows": audio_cond, "noise": noise, "audio_noise": audio_noise,
              "num_inference_steps": torch.tensor([steps])}
    config = dict(h3.config_json(model), scheduler=h3.load_config("scheduler.json"),
                  audio_scheduler=h3.load_config("audio-scheduler.json"))
    write_case(ARGS.out, "minimax_h3", "trajectory_ref2va", name, weights=h3.weights(model), inputs=inputs,
               outputs=outputs, config=config, upstream=UPSTREAM, seed=seed)


def main():
    global ARGS, UPSTREAM
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="58eb52c0803ea9af3abec60841c2a093bdf1f951")
    ARGS = ap.parse_args()
    UPSTREAM = diffusers_upstream(ARGS.commit) + " MiniMaxH3Transformer3DModel on the Ref2VA layout"
    vision = [TEXT_TAG] * 2 + [VIDEO_TAG] * 3 + [TEXT_TAG] * 2 + [VIDEO_TAG] * 2 + [TEXT_TAG] * 3
    # two images (4 x 4 and 2 x 4 latents) and a voice of 20 latent frames, 22 target frames at 64 x 64, 2 forwards
    record_f16(lambda: case("images_and_voice_2_steps", 61, 22, 64, 64, vision, [("image", 4, 4), ("audio", 20), ("image", 2, 4)], 3))


if __name__ == "__main__":
    main()
