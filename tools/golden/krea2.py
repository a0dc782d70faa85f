"""Golden vectors for Krea 2 (issue 17): the single-stream DiT, its text fusion, the sigma schedule and a trajectory,
from the official code.

Upstream (read, never copied into this repository):
  krea-ai/krea-2 @ db3984fbc6e13b34c0064990fc2d95ac64d00058: mmdit.py (SingleStreamDiT, SingleStreamBlock,
      TextFusionTransformer, PositionalEncoding), sampling.py (prepare, timesteps, the Euler loop of sample())
Fetch it and unpack the top-level files outside the repository, then run from the checkout, as root, one lab run
at a time:

  mkdir -p /tmp/krea2-up && git -C <mirror of krea-ai/krea-2> archive HEAD mmdit.py sampling.py | tar -x -C /tmp/krea2-up
  cd /work/main && flock /tmp/kiln-reflab.lock bash /work/shared/tools/reflab/run.sh -u krea2=/tmp/krea2-up -- \
      python3 /project/tools/golden/krea2.py --out /project/test/fixtures/golden

Two shims, both about running the released code on a CPU, not about what it computes: torch.compile is replaced
by an identity decorator (the decorated functions run eagerly), and mmdit.sdpa_kernel (which pins the CUDNN
backend, absent on a CPU) is replaced by a no-op context, so F.scaled_dot_product_attention picks the CPU's math
kernel. The float64 pass also lifts upstream's explicit `.float()` upcasts (RMSNorm, RoPE), as
qwen_image21_pipeline.py does, so f32_error measures float32 rounding of the whole computation.

Writes test/fixtures/golden/krea2/<component>/<case>.safetensors (format: shared spec models.md, "Golden vectors"),
every tensor F32. Weights are the checkpoint's own keys (SingleStreamDiT's state dict, which inference.py loads
strict from the released file):
  rope/         PositionalEncoding over sampling.prepare's positions: input.pos (L, 3); output.cos / output.sin
                (L, headdim / 2) (the rotation matrices' [0,0] and [1,0] entries)
  block/        one SingleStreamBlock: input.x (B, L, F), input.vec (B, 1, 6F) (the shared tproj output), input.pos
                (L, 3); output.x
  text_fusion/  TextFusionTransformer: input.taps (B, L, n, txtdim), input.mask (B, L) (1 = token, pads between
                the prompt and the suffix as the conditioner lays them out); output.layerwise.<i> (B, L, n, txtdim),
                output.projected, output.refiner.<i>, output.out (B, L, txtdim) (pad rows are undefined upstream)
  transformer/  SingleStreamDiT.forward: input.latents (B, C, H, W), input.context (B, Lt, n, txtdim), input.mask
                (B, Lt), input.t (B,); output.img (prepare's patch tokens), output.t (tmlp, (B, 1, F)), output.tvec (tproj),
                output.context (txtmlp), output.block.<i> (text + image rows after block i), output.sample
  sigmas/       sampling.timesteps: input.steps, input.seq_len, input.x1, input.x2, input.mu (NaN: interpolated);
                output.sigmas (steps + 1)
  trajectory/   the Euler loop of sampling.sample (CFG off; batch 1, or prompts of different lengths) for a few steps
                from given noise: output.v.<i>,
                output.img.<i> (tokens after step i), output.latents (the last, unpatchified), output.sigmas
"""
import argparse
import contextlib
import math
import os
import sys

import torch  # noqa: E402

# mmdit.py decorates with torch.compile(fullgraph=True); run those functions eagerly (no compiler on the lab's CPU)
torch.compile = lambda fn=None, **_k: fn if fn is not None else (lambda f: f)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import in_f16_pass, lowp, pass_dtype, record_f16, seed_everything, write_case  # noqa: E402

import mmdit  # noqa: E402
import sampling  # noqa: E402

mmdit.sdpa_kernel = lambda *a, **k: contextlib.nullcontext()

MODEL = "krea2"
UPSTREAM = f"krea-ai/krea-2@db3984fbc6e13b34c0064990fc2d95ac64d00058 mmdit.py, sampling.py (torch {torch.__version__})"

# The real model (inference.py single_mmdit_large_wide): features 6144, 48 heads / 12 KV (head dim 128, rope axes
# [32, 48, 48]), tdim 256, txtdim 2560, 12 taps, text heads 20 / 20, multiplier 4, 28 layers, patch 2, 16 channels.
# Tiny: head dim 16 (axes [4, 6, 6]: all three axes rotate), GQA 2:1, fusion at 16 wide, 3 taps.
TINY = dict(features=32, tdim=16, txtdim=16, heads=2, kvheads=1, multiplier=4, layers=2, patch=2, channels=4,
            theta=1e3, txtlayers=3, txtheads=1, txtkvheads=1, bias=False)
# Another config: head dim 32 (axes [8, 12, 12]), 2 heads sharing one KV head, multiplier 2, 1 layer, 3 channels,
# fusion 32 wide with 2 heads / 2 KV (the real fusion has no GQA), 5 taps.
OTHER = dict(features=64, tdim=8, txtdim=32, heads=2, kvheads=1, multiplier=2, layers=1, patch=2, channels=3,
             theta=1e3, txtlayers=5, txtheads=2, txtkvheads=2, bias=False)
# The same with a 16-wide single-head fusion, so whole-model fixtures stay under 512 KiB.
OTHER_SMALL_TEXT = dict(OTHER, txtdim=16, txtheads=1, txtkvheads=1)


@contextlib.contextmanager
def float64_throughout():
    """In the float64 pass, `.float()` leaves float64 tensors float64 (upstream upcasts half precision with it)."""
    if pass_dtype() != torch.float64:
        yield
        return
    orig = torch.Tensor.float

    def keep64(self, *a, **k):
        return self if self.dtype == torch.float64 else orig(self, *a, **k)

    torch.Tensor.float = keep64
    try:
        yield
    finally:
        torch.Tensor.float = orig


def randomize(model, gen):
    """Linears ~ U(+-1.5/sqrt(fan_in)) (the timestep path's U(+-2/sqrt(fan_in)), so the modulation is O(1)), biases
    ~ U(+-0.5); the zero-initialised tensors get values: RMSNorm scales (stored as multiplier - 1) ~ N(0, 0.3), QK-norm
    scales ~ U(-0.2, 0.6) (logits spread over a few units, yet not so sharp that f16 rounding flips them), the
    per-block and final modulation biases ~ N(0, 0.5)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("qnorm.scale", "knorm.scale")):
                p.copy_(-0.2 + 0.8 * torch.rand(p.shape, generator=gen))
            elif name.endswith(".scale") or name.endswith("txtmlp.0.scale"):
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            elif name.endswith("mod.lin") or name.endswith("modulation.lin"):
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            elif name.endswith("projector.weight"):
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[1] ** 0.5)
            elif p.dim() == 2:
                gain = 2.0 if name.startswith(("tmlp.", "tproj.")) else 1.5
                p.copy_((torch.rand(p.shape, generator=gen) * 2 - 1) * gain / p.shape[1] ** 0.5)
            elif name.endswith(".bias"):
                p.copy_((torch.rand(p.shape, generator=gen) * 2 - 1) * 0.5)


def build(seed, **over):
    gen = seed_everything(seed)
    cfg = dict(TINY, **over)
    model = mmdit.SingleStreamDiT(mmdit.SingleMMDiTConfig(**cfg)).eval()
    randomize(model, gen)
    return cfg, model, gen


def positions(txtlen, h, w):
    """sampling.prepare's positions for batch 1: text rows (0, 0, 0), then image rows (0, r, c) over the h x w grid."""
    img = torch.zeros(1, 4, h * 2, w * 2)
    _, pos, _ = sampling.prepare(img, txtlen, 2, torch.ones(1, txtlen, dtype=torch.bool))
    return pos[0]


def text_mask(batch, prompt, pads, suffix=5):
    """The conditioner's layout after the system prefix is dropped: [prompt | pads | suffix], True = token."""
    row = [True] * prompt + [False] * pads + [True] * suffix
    return torch.tensor([row] * batch)


# ---------------------------------------------------------------- rope


def rope_case(out, case, headdim, theta, txtlen, h, w):
    seed_everything(0)
    pos = positions(txtlen, h, w)
    axes = [headdim - 12 * (headdim // 16), 6 * (headdim // 16), 6 * (headdim // 16)]
    pe = mmdit.PositionalEncoding(headdim * 4, axes, theta=theta)
    with float64_throughout():
        freqs = pe(lowp(pos, f32=True)[None])[0]  # (L, hd/2, 2, 2)
    write_case(out, MODEL, "rope", case, weights={}, inputs={"pos": pos},
               outputs={"cos": freqs[..., 0, 0], "sin": freqs[..., 1, 0]},
               config={"headdim": headdim, "axes": axes, "theta": theta}, upstream=UPSTREAM, seed=0)


# ---------------------------------------------------------------- block


def block_case(out, case, seed, batch, txtlen, h, w, **over):
    cfg, model, gen = build(seed, **dict(over, layers=1))
    F = cfg["features"]
    block = model.blocks[0]
    pos = positions(txtlen, h, w)
    x = 2.0 * torch.randn(batch, txtlen + h * w, F, generator=gen)
    vec = torch.randn(batch, 1, 6 * F, generator=gen)
    with torch.no_grad(), float64_throughout():
        freqs = model.posemb(lowp(pos, f32=True)[None].expand(batch, -1, -1))
        y = lowp(block)(lowp(x), lowp(vec), freqs, None)
    weights = {k: v for k, v in model.state_dict().items() if k.startswith("blocks.0.")}
    write_case(out, MODEL, "block", case, weights=weights, inputs={"x": x, "vec": vec, "pos": pos},
               outputs={"x": y}, config=cfg, upstream=UPSTREAM, seed=seed)


# ---------------------------------------------------------------- text fusion


def fusion_case(out, case, seed, batch, prompt, pads, **over):
    cfg, model, gen = build(seed, **dict(over, layers=1))
    fusion = model.txtfusion
    mask = text_mask(batch, prompt, pads)
    L = mask.shape[1]
    taps = 3.0 * torch.randn(batch, L, cfg["txtlayers"], cfg["txtdim"], generator=gen)
    got = {}
    hooks = []
    run = lowp(fusion)
    for i, blk in enumerate(run.layerwise_blocks):
        hooks.append(blk.register_forward_hook(lambda _m, _a, o, i=i: got.__setitem__(f"layerwise.{i}", o)))
    for i, blk in enumerate(run.refiner_blocks):
        hooks.append(blk.register_forward_hook(lambda _m, _a, o, i=i: got.__setitem__(f"refiner.{i}", o)))
    hooks.append(run.projector.register_forward_hook(lambda _m, _a, o: got.__setitem__("projected", o.squeeze(-1))))
    with torch.no_grad(), float64_throughout():
        y = run(lowp(taps), mask=mmdit._mask(mask))
    for hk in hooks:
        hk.remove()
    n = cfg["txtlayers"]
    outputs = {"out": y, "projected": got["projected"]}
    for i in range(2):
        outputs[f"layerwise.{i}"] = got[f"layerwise.{i}"].reshape(batch, L, n, cfg["txtdim"])
        outputs[f"refiner.{i}"] = got[f"refiner.{i}"]
    weights = {k[len("txtfusion."):]: v for k, v in model.state_dict().items() if k.startswith("txtfusion.")}
    write_case(out, MODEL, "text_fusion", case, weights={"txtfusion." + k: v for k, v in weights.items()},
               inputs={"taps": taps, "mask": mask.float()}, outputs=outputs, config=cfg, upstream=UPSTREAM, seed=seed)


# ---------------------------------------------------------------- transformer


def capture(model):
    got = {}
    hooks = [
        model.tmlp.register_forward_hook(lambda _m, _a, o: got.__setitem__("t", o)),
        model.tproj.register_forward_hook(lambda _m, _a, o: got.__setitem__("tvec", o)),
        model.txtmlp.register_forward_hook(lambda _m, _a, o: got.__setitem__("context", o)),
        model.first.register_forward_pre_hook(lambda _m, a: got.__setitem__("img", a[0])),
    ]
    for i, blk in enumerate(model.blocks):
        hooks.append(blk.register_forward_hook(lambda _m, _a, o, i=i: got.__setitem__(f"block.{i}", o)))
    return got, hooks


def transformer_inputs(gen, cfg, batch, prompt, pads, h, w):
    """Latents (B, C, 2h, 2w) (an h x w patch grid), fusion taps and the text mask."""
    mask = text_mask(batch, prompt, pads)
    latents = torch.randn(batch, cfg["channels"], 2 * h, 2 * w, generator=gen)
    taps = 3.0 * torch.randn(batch, mask.shape[1], cfg["txtlayers"], cfg["txtdim"], generator=gen)
    return latents, taps, mask


def transformer_case(out, case, seed, batch, prompt, pads, h, w, t, more=(), **over):
    """`t`: one sigma for the batch, or one per sample; `more`: the (prompt, pads) of samples 1.. when their text
    masks differ from sample 0's (same padded length)."""
    cfg, model, gen = build(seed, **over)
    latents, taps, mask = transformer_inputs(gen, cfg, batch, prompt, pads, h, w)
    for b, (p_b, pads_b) in enumerate(more, start=1):
        mask[b] = text_mask(1, p_b, pads_b)[0]
        assert p_b + pads_b == prompt + pads, "one padded text length for the batch"
    tt = torch.tensor(t, dtype=torch.float32) if isinstance(t, (list, tuple)) else torch.full((batch,), t)
    img, pos, full_mask = sampling.prepare(latents, taps.shape[1], cfg["patch"], mask)
    run = lowp(model)
    got, hooks = capture(run)
    with torch.no_grad(), float64_throughout():
        sample = run(img=lowp(img), context=lowp(taps), t=lowp(tt, f32=True), pos=lowp(pos, f32=True), mask=full_mask)
    for hk in hooks:
        hk.remove()
    txtlen, imglen = taps.shape[1], img.shape[1]
    outputs = {"sample": sample, "img": got["img"], "t": got["t"], "tvec": got["tvec"], "context": got["context"]}
    for i in range(cfg["layers"]):
        outputs[f"block.{i}"] = got[f"block.{i}"][:, : txtlen + imglen]
    write_case(out, MODEL, "transformer", case, weights=dict(model.state_dict()),
               inputs={"latents": latents, "context": taps, "mask": mask.float(), "t": tt}, outputs=outputs,
               config=cfg, upstream=UPSTREAM, seed=seed)


# ---------------------------------------------------------------- sigmas and trajectory


def sigmas_case(out, case, steps, seq_len, mu, minres=256, maxres=1280, patch=2, compression=8):
    x1 = (minres // (compression * patch)) ** 2
    x2 = (maxres // (compression * patch)) ** 2
    ts = sampling.timesteps(seq_len, steps, x1, x2, mu=mu)
    write_case(out, MODEL, "sigmas", case, weights={},
               inputs={"steps": torch.tensor([steps]), "seq_len": torch.tensor([seq_len]), "x1": torch.tensor([x1]),
                       "x2": torch.tensor([x2]), "mu": torch.tensor([math.nan if mu is None else mu])},
               outputs={"sigmas": torch.tensor(ts, dtype=torch.float64)},
               config={"y1": 0.5, "y2": 1.15, "sigma": 1.0}, upstream=UPSTREAM, seed=0,
               tolerance={"f32": {"atol": 1e-7, "rtol": 1e-6}})


def trajectory_case(out, case, seed, prompt, pads, h, w, steps=2, mu=1.15, more=(), **over):
    """sampling.sample's loop with guidance 0 (Turbo) on given noise; the schedule pins mu as the Turbo command does.
    `more`: further samples' (prompt, pads), as sample() batches several prompts, each with its own text mask over
    the same padded length."""
    cfg, model, gen = build(seed, **over)
    batch = 1 + len(more)
    noise, taps, mask = transformer_inputs(gen, cfg, batch, prompt, pads, h, w)
    for b, (p_b, pads_b) in enumerate(more, start=1):
        mask[b] = text_mask(1, p_b, pads_b)[0]
        assert p_b + pads_b == prompt + pads, "one padded text length for the batch"
    img, pos, full_mask = sampling.prepare(noise, taps.shape[1], cfg["patch"], mask)
    ts = sampling.timesteps(img.shape[1], steps, 1, 2, mu=mu)
    outputs = {"sigmas": torch.tensor(ts, dtype=torch.float64)}
    run = lowp(model)
    x = lowp(img)
    with torch.no_grad(), float64_throughout():
        for i, (tcurr, tprev) in enumerate(zip(ts[:-1], ts[1:])):
            # sample() builds t in the latents' dtype; the f16 pass keeps it float32, as Kiln does (the model's
            # timestep embedding is computed from the schedule's value in f32 in every variant)
            t = torch.full((batch,), tcurr, dtype=torch.float64 if x.dtype == torch.float64 else torch.float32)
            v = run(img=x, context=lowp(taps), t=t, pos=lowp(pos, f32=True), mask=full_mask)
            x = x + (tprev - tcurr) * v
            outputs[f"v.{i}"] = v
            outputs[f"img.{i}"] = x
    p = cfg["patch"]
    outputs["latents"] = x.reshape(batch, h, w, cfg["channels"], p, p).permute(0, 3, 1, 4, 2, 5).reshape(noise.shape)
    write_case(out, MODEL, "trajectory", case, weights=dict(model.state_dict()),
               inputs={"noise": noise, "context": taps, "mask": mask.float(), "steps": torch.tensor([steps]),
                       "mu": torch.tensor([mu])},
               outputs=outputs, config=cfg, upstream=UPSTREAM, seed=seed)


def main(out):
    rope_case(out, "hd16", 16, 1e3, 5, 3, 4)
    rope_case(out, "hd128_real_axes", 128, 1e3, 3, 6, 5)
    rope_case(out, "hd32_theta1e4", 32, 1e4, 2, 4, 2)

    block_case(out, "b1", 11, 1, 6, 3, 4)
    block_case(out, "b2_no_text", 12, 2, 0, 2, 3)
    block_case(out, "other_config", 13, 1, 4, 2, 2, **OTHER)

    fusion_case(out, "b1_pads", 21, 1, 4, 3)
    fusion_case(out, "b1_no_pads", 22, 1, 7, 0)
    fusion_case(out, "other_config_b2", 23, 2, 3, 2, **OTHER)
    fusion_case(out, "twelve_taps", 24, 1, 5, 2, txtlayers=12)  # the release's tap count

    transformer_case(out, "b1_pads", 31, 1, 4, 3, 3, 4, 0.76)
    transformer_case(out, "b1_no_pads", 32, 1, 6, 0, 2, 2, 0.31)
    transformer_case(out, "other_config", 33, 1, 3, 2, 2, 3, 0.9, **OTHER_SMALL_TEXT)
    # batch 2: upstream's t and tvec have one row per sample (issue 51)
    transformer_case(out, "b2_pads", 34, 2, 3, 2, 2, 3, 0.55)
    # what upstream's forward also takes: a sigma and a text mask per sample
    transformer_case(out, "b2_two_prompts_two_sigmas", 35, 2, 4, 1, 2, 2, [0.8, 0.35], more=[(2, 3)])

    for steps, seq, mu in [(8, 4096, 1.15), (8, 64, 1.15), (4, 16384, 1.15), (2, 256, 1.15), (28, 4096, None),
                           (28, 256, None), (20, 16384, None), (13, 1000, 0.7)]:
        sigmas_case(out, f"steps{steps}_seq{seq}_mu{'interp' if mu is None else mu}", steps, seq, mu)

    trajectory_case(out, "turbo_2_steps", 41, 4, 2, 3, 3)
    trajectory_case(out, "other_config_3_steps", 42, 3, 0, 2, 2, steps=3, **OTHER_SMALL_TEXT)
    # two prompts of different lengths in one batch, as sample() runs a list of prompts (issue 51)
    trajectory_case(out, "b2_two_prompts", 43, 4, 1, 2, 3, more=[(2, 3)])


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="fixture root (test/fixtures/golden)")
    a = ap.parse_args()
    record_f16(lambda: main(a.out))
