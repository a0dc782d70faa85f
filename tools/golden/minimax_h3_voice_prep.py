"""Golden vectors for src/models/minimax_h3/conditioning/voice-inputs.ts and src/models/common/torchaudio-resample.ts: a voice
(an audio reference of the Ref2VA path) put onto the audio VAE's rate as diffusers' modular pipeline does it (58eb52c0):
MiniMaxH3Ref2VASetupStep.__call__ with an image reference and an audio reference MiniMaxH3AudioReference(audio,
sample_rate), whose _normalize_audio_condition truncates the clip at its own rate to int(num_frames / fps * rate)
samples, makes it stereo (a mono channel repeated) and resamples it with torchaudio.transforms.Resample(rate, 32000)
(sinc_interp_hann, lowpass_filter_width 6, rolloff 0.99; the kernel computed in float64 and cached as float32).

Run in the reference lab (torchaudio installed there):
  bash ../shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers/src -- \
    env OPENBLAS_NUM_THREADS=1 python3 /project/tools/golden/minimax_h3_voice_prep.py --out /project/test/fixtures/golden
Writes minimax_h3/voice_prep/<case>.safetensors:
  input.waveform   [channels, samples] the clip at its own rate (float32; 1 or 2 channels)
  output.waveform  [2, samples'] what the setup step hands the audio VAE encoder (float32, 32 kHz)
  output.kernel    [new, 1, 2 width + orig] torchaudio's cached kernel (orig / new the rates over their gcd), where it
                   is small (at most 16384 values) and a resampling happens
config {sample_rate, target_rate, num_frames, fps, width}. The step runs with its block-state plumbing stubbed and
min_duration 0, so a few frames keep the fixtures small (the truncation is the same expression at any length).
"""
import argparse
import math
import os
import sys
from types import SimpleNamespace

import numpy as np
import torch
import torchaudio
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import diffusers_upstream, write_case  # noqa: E402

from diffusers.image_processor import VaeImageProcessor  # noqa: E402
from diffusers.modular_pipelines.minimax_h3.before_encoder import MiniMaxH3Ref2VASetupStep  # noqa: E402
from diffusers.modular_pipelines.minimax_h3.references import MiniMaxH3AudioReference, MiniMaxH3ImageReference  # noqa: E402

MODEL, COMPONENT = "minimax_h3", "voice_prep"
TARGET = 32000
MAX_KERNEL = 16384

# name: (seed, rate, channels, seconds of clip, num_frames); 5 frames = 0.2083 s, 22 = 0.9167 s
CASES = {
    "r8000_mono_cut": (9101, 8000, 1, 0.5, 5),  # up x4, truncated at 1666 samples
    "r16000_stereo_short": (9102, 16000, 2, 0.3, 22),  # up x2, shorter than the video: whole
    "r22050_mono_cut": (9103, 22050, 1, 0.4, 5),  # 441 -> 640 phases, truncated at int(4593.75)
    "r44100_stereo_cut": (9104, 44100, 2, 0.25, 5),  # down 441 -> 320
    "r48000_mono_short": (9105, 48000, 1, 0.2, 22),  # down 3 -> 2
    "r48000_stereo_cut": (9106, 48000, 2, 0.3, 5),
    "r32000_stereo_cut": (9107, 32000, 2, 0.4, 5),  # the VAE's rate: only truncated
    "r32000_mono_short": (9108, 32000, 1, 0.15, 22),  # only duplicated
    "r11025_odd_length": (9109, 11025, 1, 1237 / 11025, 22),  # 441 -> 1280, an odd length, whole
    "r24000_stereo_cut": (9110, 24000, 2, 0.3, 5),  # up 3 -> 4
    "r96000_mono_cut": (9111, 96000, 1, 0.25, 5),  # down 3 -> 1
}


def clip(gen, rate, channels, seconds):
    n = int(round(seconds * rate))
    t = torch.arange(n, dtype=torch.float64) / rate
    out = []
    for c in range(channels):
        # two tones (one near the lower Nyquist of the pair of rates), a chirp and white noise: energy in the
        # pass band, at the roll-off and beyond it
        f1, f2 = 220.0 * (c + 1), 0.45 * min(rate, TARGET)
        x = 0.3 * torch.sin(2 * math.pi * f1 * t) + 0.2 * torch.sin(2 * math.pi * f2 * t)
        x += 0.2 * torch.sin(2 * math.pi * (100 + 2000 * t) * t)
        x += 0.15 * torch.randn(n, generator=gen, dtype=torch.float64)
        out.append(x)
    return torch.stack(out).to(torch.float32)


def run_step(waveform, rate, frames):
    step = MiniMaxH3Ref2VASetupStep()
    components = SimpleNamespace(image_processor=VaeImageProcessor(vae_scale_factor=16), canvas_multiple=32,
                                 config=SimpleNamespace(canvas_short_edge=64, canvas_max_pixels=64 * 112,
                                                        reference_image_short_edge=32),
                                 vae_frames_per_chunk=17, vae_latents_per_chunk=5, fps=24, min_duration=0.0,
                                 max_duration=15.0, audio_sampling_rate=TARGET)
    picture = Image.fromarray(np.full((32, 32, 3), 128, np.uint8))
    state = SimpleNamespace(references=[MiniMaxH3ImageReference(image=picture),
                                        MiniMaxH3AudioReference(audio=waveform.clone(), sample_rate=rate)],
                            num_frames=frames, height=None, width=None)
    step.get_block_state = lambda _s: state
    step.set_block_state = lambda _s, bs: None
    step.__call__(components, None)
    assert state.num_frames == frames, f"{frames} frames were aligned to {state.num_frames}"
    audio = state.normalized_references[1]
    assert audio.sample_rate == TARGET
    return audio.audio


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="58eb52c0803ea9af3abec60841c2a093bdf1f951")
    args = ap.parse_args()
    torch.set_num_threads(1)
    upstream = diffusers_upstream(args.commit) + (f" MiniMaxH3Ref2VASetupStep._normalize_audio_condition"
                                                  f" (torchaudio {torchaudio.__version__})")
    for name, (seed, rate, channels, seconds, frames) in CASES.items():
        gen = torch.Generator().manual_seed(seed)
        wave = clip(gen, rate, channels, seconds)
        out = run_step(wave, rate, frames)
        outputs = {"waveform": out}
        width = 0
        if rate != TARGET:
            resampler = torchaudio.transforms.Resample(rate, TARGET)
            width = resampler.width
            if resampler.kernel.numel() <= MAX_KERNEL:
                outputs["kernel"] = resampler.kernel
        config = {"sample_rate": rate, "target_rate": TARGET, "num_frames": frames, "fps": 24, "width": width}
        write_case(args.out, MODEL, COMPONENT, name, weights={}, inputs={"waveform": wave}, outputs=outputs,
                   config=config, upstream=upstream, seed=seed,
                   tolerance={"f32": {"atol": 1e-6, "rtol": 0.0}})
        print(name, tuple(wave.shape), "->", tuple(out.shape), "kernel" if "kernel" in outputs else "")


if __name__ == "__main__":
    main()
