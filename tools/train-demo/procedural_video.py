"""The video demo's procedural data (issue 18): prompts of a small grammar and the clips they describe, drawn exactly.

Video grammar: "a <color> ball moving <left|right|up|down> on a <color> background, <high|low> beep". The palette is
the image demo's (procedural.py COLORS), the background differs from the ball. The ball is a fifth of the frame's
height across and moves in a straight line at constant speed through the clip: left / right from 0.25 to 0.75 of the
width (or back), up / down from 0.25 to 0.75 of the height (or back), i.e. across half the frame, its other coordinate
somewhere in the middle. The soundtrack is a stereo sine at 1,200 Hz (high) or 320 Hz (low) on both channels.

Not 300 Hz: a 300 Hz tone's period (106.7 samples at 32 kHz) makes every 800-sample audio latent hold exactly 7.5
periods, so consecutive latents see the wave with opposite signs, and a decoder that is equivariant to the 800-sample
stride (BigVGAN's transposed convolutions are) cannot draw it from latents that have to alternate; it made silence.

Clip geometry is the service's "1 s" job at 352p 16:9: 39 frames at 24 fps, 608 x 352 (12 latent frames, 65 audio
latents of 800 samples at 32 kHz per channel).
"""
import math
import random

import numpy as np
from PIL import Image, ImageDraw

from procedural import COLORS

DIRECTIONS = ("left", "right", "up", "down")
BEEPS = {"high": 1200.0, "low": 320.0}
WIDTH, HEIGHT, FRAMES, FPS = 608, 352, 39, 24
SAMPLE_RATE = 32000
AUDIO_LATENTS = int(round(FRAMES / FPS * 40))  # 65, the pipeline's audio_latent_num_frames
SAMPLES = AUDIO_LATENTS * 800
BALL = 0.2  # of the frame's height, across
TRAVEL = (0.25, 0.75)  # of the frame along the direction of motion
JITTER_ALONG, JITTER_ACROSS, JITTER_SIZE = 0.01, 0.02, 0.02  # a clip's random offsets (fractions) and size change


def prompt_of(color: str, direction: str, background: str, beep: str) -> str:
    return f"a {color} ball moving {direction} on a {background} background, {beep} beep"


def video_table() -> list[tuple[str, str, str]]:
    """Every (color, direction, background) of the grammar: 8 x 4 x 7 = 224 clips (the sound is independent)."""
    return [(c, d, b) for c in COLORS for d in DIRECTIONS for b in COLORS if b != c]


def all_prompts() -> list[tuple[str, str, str, str]]:
    return [(c, d, b, s) for c, d, b in video_table() for s in BEEPS]


def path(direction: str, jitter: random.Random | None = None) -> tuple[tuple[float, float], tuple[float, float]]:
    """The ball's centre at the first and last frame, as fractions of (width, height)."""
    a, b = TRAVEL
    other = 0.5
    if jitter:
        # small: the model first learns E[clip | prompt] (sampling starts there), which wider jitter smears into a faint
        # band (a +-0.15 offset across the motion spread a 70-pixel ball over 180 pixels)
        a += jitter.uniform(-JITTER_ALONG, JITTER_ALONG)
        b += jitter.uniform(-JITTER_ALONG, JITTER_ALONG)
        other += jitter.uniform(-JITTER_ACROSS, JITTER_ACROSS)
    if direction == "right":
        return (a, other), (b, other)
    if direction == "left":
        return (b, other), (a, other)
    if direction == "down":
        return (other, a), (other, b)
    return (other, b), (other, a)


def draw_clip(color: str, direction: str, background: str, width: int = WIDTH, height: int = HEIGHT,
              frames: int = FRAMES, jitter: random.Random | None = None) -> np.ndarray:
    """(frames, height, width, 3) uint8 RGB: the ball of `color` moving `direction` on `background`."""
    (x0, y0), (x1, y1) = path(direction, jitter)
    r = BALL * height / 2
    if jitter:
        r *= jitter.uniform(1 - JITTER_SIZE, 1 + JITTER_SIZE)
    out = np.empty((frames, height, width, 3), dtype=np.uint8)
    for i in range(frames):
        t = i / (frames - 1)
        cx, cy = (x0 + (x1 - x0) * t) * width, (y0 + (y1 - y0) * t) * height
        img = Image.new("RGB", (width, height), COLORS[background])
        ImageDraw.Draw(img).ellipse([cx - r, cy - r, cx + r, cy + r], fill=COLORS[color])
        out[i] = np.asarray(img)
    return out


def tone(beep: str, samples: int = SAMPLES, rate: int = SAMPLE_RATE, phase: float = 0.0,
         amplitude: float = 0.5) -> np.ndarray:
    """(2, samples) float32 stereo sine (both channels alike) at the beep's frequency, with 10 ms fades."""
    t = np.arange(samples, dtype=np.float64) / rate
    wave = amplitude * np.sin(2 * math.pi * BEEPS[beep] * t + phase)
    fade = min(samples // 2, int(0.01 * rate))
    env = np.ones(samples)
    env[:fade] = np.linspace(0, 1, fade)
    env[-fade:] = np.linspace(1, 0, fade)
    wave = (wave * env).astype(np.float32)
    return np.stack([wave, wave])


def ball_centroid(frames: np.ndarray, background: tuple[int, int, int]) -> list[tuple[float, float] | None]:
    """Per frame, the centroid (x, y in pixels) of the pixels that differ from the background colour by more than 60
    (L1 over RGB); None where no pixel does. Used by video_eval.py on decoded clips."""
    bg = np.asarray(background, dtype=np.int32)
    out = []
    for f in frames.astype(np.int32):
        mask = np.abs(f - bg).sum(-1) > 60
        if mask.sum() < 20:
            out.append(None)
            continue
        ys, xs = np.nonzero(mask)
        out.append((float(xs.mean()), float(ys.mean())))
    return out


def nearest_color(rgb) -> str:
    """The palette's colour nearest to an RGB triple (squared distance)."""
    return min(COLORS, key=lambda c: sum((float(a) - b) ** 2 for a, b in zip(rgb, COLORS[c])))


def background_and_ball(frames: np.ndarray) -> tuple[np.ndarray, str | None]:
    """frames (F, H, W, 3) uint8 -> (the background's RGB: the median of the middle frame's 8-pixel border, the ball's
    colour: the palette's nearest to the mean of every pixel more than 60 off the background, None under 51 such
    pixels). The rule video_eval.py judges clips by, and video.py's VAE check with it."""
    mid = frames[len(frames) // 2].astype(np.float32)
    border = np.concatenate([mid[:8].reshape(-1, 3), mid[-8:].reshape(-1, 3), mid[:, :8].reshape(-1, 3), mid[:, -8:].reshape(-1, 3)])
    bg_rgb = np.median(border, axis=0)
    mask = np.abs(frames.astype(np.int32) - bg_rgb.astype(np.int32)).sum(-1) > 60
    return bg_rgb, (nearest_color(frames[mask].mean(0)) if mask.sum() > 50 else None)


def judge(frames: np.ndarray, audio: np.ndarray, rate: int) -> dict:
    """frames (F, H, W, 3) uint8, audio (2, samples): what the clip shows and sounds like, by the rule of the API test
    (test/api/demo-video-grammar.ts judgeClip); video_eval.py and video.py --stage judge_sampled judge by it."""
    bg_rgb, ball = background_and_ball(frames)
    bg = nearest_color(bg_rgb)
    cents = ball_centroid(frames, tuple(int(v) for v in bg_rgb))
    q = max(1, len(frames) // 4)
    first = [c for c in cents[:q] if c]
    last = [c for c in cents[-q:] if c]
    direction = None
    if first and last:
        dx = np.mean([c[0] for c in last]) - np.mean([c[0] for c in first])
        dy = np.mean([c[1] for c in last]) - np.mean([c[1] for c in first])
        direction = ("right" if dx > 0 else "left") if abs(dx) > abs(dy) else ("down" if dy > 0 else "up")
    spec = np.abs(np.fft.rfft(audio.mean(0)))
    f = np.fft.rfftfreq(audio.shape[-1], 1 / rate)
    hi = float(spec[(f > 1000) & (f < 1400)].sum())
    lo = float(spec[(f > 220) & (f < 420)].sum())
    return dict(background=bg, ball=ball, direction=direction, beep="high" if hi > lo else "low",
                band_ratio=round(hi / max(lo, 1e-9), 2), peak=round(float(np.abs(audio).max()), 3))
