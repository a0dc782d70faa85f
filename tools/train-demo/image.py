"""Trains the demo Qwen-Image-2.1 checkpoint (imgmain, imgmain_bf16) on procedural pictures (issue 18), with
upstream's own model classes, so the weights load through Kiln's real loaders, to draw the demo grammar: "a <color>
<shape> [at the <position>] on a <color> background" (procedural.py; what it draws today: docs/models/demo.md).

Upstream (read, never copied into this repository): huggingface/diffusers QwenImage21Pipeline (0a1f3676),
QwenImage21Transformer2DModel, AutoencoderKLQwenImage21 (the copy of the diffusers tree the golden generators use),
transformers' Qwen3VLForConditionalGeneration. The starting point is Kiln's own random demo checkpoint (its configs,
tokenizer, processor and text encoder), written by test/models/e2e-checkpoints.ts.

Recipe of the committed weights (as root; fixed seeds). Install OpenBLAS in the lab first: its PyTorch is built
against the generic BLAS, which Debian resolves to the reference one (15x slower matmuls here), and run with
OPENBLAS_NUM_THREADS=1 (OpenBLAS's own threads spin against anything else on the 2 cores and stalled a run for
minutes at a time):

  chroot /opt/reflab apt-get install -y libopenblas0-pthread

Part A is the first recipe (its transformer is thrown away; what it leaves is the VAE, the latents of every prompt's
picture and the text encoder's decoder layers as its three runs trained them):

  cd /work/main && npx tsc -p tsconfig.test.json --outDir build/train
  node build/train/test/models/e2e-checkpoints.js qwen_image21 /opt/reflab/tmp/train/qi21-random
  lab="bash /work/shared/tools/reflab/run.sh -u diffusers=/opt/upstream/diffusers-qi21/src \
      -u proc=/work/shared/upstream/minimax-h3/processor -- env OPENBLAS_NUM_THREADS=1"
  args="--random /tmp/train/qi21-random --work /tmp/train/qi21 --out /tmp/train/qi21-out"
  $lab python3 /project/tools/train-demo/image.py --stage vae $args                       # 800 steps
  $lab python3 /project/tools/train-demo/image.py --stage dit --dit-steps 1300 --sigmas uniform --stop-after 400 $args
  $lab python3 /project/tools/train-demo/image.py --stage dit --resume --dit-steps 1400 $args
  $lab python3 /project/tools/train-demo/image.py --stage dit --resume --dit-steps 1200 $args

Part B, the committed transformer: a fresh one with wider heads (2 blocks, 4 heads x 32, RoPE [8, 12, 12]), trained
in five runs, each going on from the last (--resume), the shape's latent cells weighted 9x throughout; a run's loss
log is kept as dit_losses_stageN.json for plot.py:

  mkdir -p /opt/reflab/tmp/train/qi21e && cd /opt/reflab/tmp/train
  cp -r qi21/checkpoint qi21e/ && ln qi21/latents.pt qi21e/latents.pt && cp qi21/vae_losses.json qi21e/ && cd /work/main
  args="--random /tmp/train/qi21-random --work /tmp/train/qi21e --out /tmp/train/qi21e-out --threads 1 --shape-weight 8"
  keep() { mv /opt/reflab/tmp/train/qi21e/dit_losses.json /opt/reflab/tmp/train/qi21e/dit_losses_stage$1.json; }
  $lab python3 /project/tools/train-demo/image.py --stage dit --dit-steps 300 --sigmas one --sizes 256 \
      --layers 2 --heads 4 --head-dim 32 $args && keep 1                                   # E[x0 | text] at sigma 1
  $lab python3 /project/tools/train-demo/image.py --stage dit --resume --dit-steps 450 --sigmas mix $args && keep 2
  $lab python3 /project/tools/train-demo/image.py --stage dit --resume --dit-steps 500 --sigmas one --sizes 256 $args && keep 3
  $lab python3 /project/tools/train-demo/image.py --stage dit --resume --dit-steps 1000 --stop-after 400 --sigmas onemix $args && keep 4
  $lab python3 /project/tools/train-demo/image.py --stage dit --resume --dit-steps 1000 --sigmas onemix $args
  rm -rf assets/demo/qwen-image-2.1 && cp -r /opt/reflab/tmp/train/qi21e-out assets/demo/qwen-image-2.1
  $lab python3 /project/tools/train-demo/plot.py --work /tmp/train/qi21e --out /project/docs/images/demo-image-losses.png

Part B's 2,650 steps take about 25 minutes with OpenBLAS on an idle box (the last run: 1,000 steps in 372 s). How
the committed files were actually made: runs 1-2 before OpenBLAS was installed (2 threads, reference BLAS), run 3 on
1 thread, run 4 with OpenBLAS on 2 threads (stopped by hand right after its step-400 snapshot, which is what
--stop-after 400 does), run 5 as above. Other BLAS builds and thread counts round differently, so a re-run gives
weights that differ in the last bits and draws that differ in detail, not in what they show. (The first transformer
run of part A encodes every prompt's picture once, about 10 minutes, into latents.pt.)

Other flags (docs/models/demo.md says what other runs showed): --lr, --sigmas uniform | high, --sizes.
probe.py shows a checkpoint's x0 predictions per sigma.

What is trained, and how (docs/models/demo.md):
  1. the VAE (encoder and decoder), on 64 x 64 crops of 128 x 128 and 256 x 256 pictures: L1 + MSE reconstruction
     and a small KL term; then its latents' per-channel mean and std over the data set become latents_mean /
     latents_std (the pipeline normalises with them, as upstream does with the released statistics);
  2. the transformer and the text encoder's decoder layers, by flow matching as the pipeline samples:
     x_s = (1 - s) x0 + s n, the model (given s as the timestep) predicts n - x0; s from u (uniform, or weighted
     toward 1) through the scheduler's exponential shift at the image's mu, so training sees the sigmas inference
     visits. Text: the pipeline's own prompt embeddings (template, last layer before the final norm, dropped system
     turn). At 256 x 256 and 512 x 512, from latents of every prompt's picture encoded once.
The transformer and the VAE are written in BF16 like the random demo; the text encoder's values go back into its own
shards; the processor files are copied unchanged.
"""
import argparse
import json
import math
import os
import random
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden"))
from procedural import all_prompts, draw, prompt_of, to_tensor_np  # noqa: E402
from qwen_image21_pipeline import load_pipeline  # noqa: E402

from diffusers.models.autoencoders.autoencoder_kl_qwenimage21 import AutoencoderKLQwenImage21  # noqa: E402
from diffusers.models.transformers.transformer_qwenimage21 import QwenImage21Transformer2DModel  # noqa: E402
from diffusers.pipelines.qwenimage21.pipeline_qwenimage21 import QwenImage21Pipeline, calculate_shift  # noqa: E402

SEED = 20261125


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def batch_images(rng: random.Random, n: int, size: int) -> torch.Tensor:
    """(n, 4, 1, size, size) pictures of random prompts, jittered."""
    prompts = all_prompts()
    arr = [to_tensor_np(draw(*rng.choice(prompts), size, size, jitter=rng)) for _ in range(n)]
    return torch.from_numpy(np.stack(arr))[:, :, None]


# ---- 1. the VAE ----------------------------------------------------------------------------------------------

def train_vae(vae: AutoencoderKLQwenImage21, steps: int, lr: float, batch: int, crop: int) -> list[float]:
    rng = random.Random(SEED)
    opt = torch.optim.AdamW(vae.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.05)
    vae.train()
    losses = []
    for step in range(steps):
        size = rng.choice([128, 256])  # shapes of 32 and 64 px: edges at both scales in one crop size
        x = batch_images(rng, batch, size)
        i, j = rng.randrange(0, size - crop + 1, 16), rng.randrange(0, size - crop + 1, 16)
        x = x[..., i:i + crop, j:j + crop]
        post = vae.encode(x).latent_dist
        z = post.sample()
        rec = vae.decode(z).sample
        kl = post.kl().mean() / z[0].numel()
        loss = F.l1_loss(rec, x) + F.mse_loss(rec, x) + 1e-4 * kl
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(vae.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 0 or step == steps - 1:
            log(f"vae {step}/{steps} loss {np.mean(losses[-50:]):.4f} (l1 {float(F.l1_loss(rec, x)):.4f}, kl/elt {float(kl):.3f})")
    vae.eval()
    return losses


@torch.no_grad()
def latent_stats(vae: AutoencoderKLQwenImage21, n: int) -> tuple[list[float], list[float]]:
    rng = random.Random(SEED + 1)
    zs = []
    for _ in range(n // 16):
        zs.append(vae.encode(batch_images(rng, 16, 256)).latent_dist.mode())
    z = torch.cat(zs)  # (n, C, 1, h, w)
    mean = z.mean(dim=(0, 2, 3, 4))
    std = z.std(dim=(0, 2, 3, 4)).clamp_min(1e-3)
    return [round(float(v), 5) for v in mean], [round(float(v), 5) for v in std]


# ---- 2. the transformer ---------------------------------------------------------------------------------------

@torch.no_grad()
def prompt_embeds(pipe: QwenImage21Pipeline, prompts: list[str]) -> list[torch.Tensor]:
    """Each prompt's embeddings exactly as the pipeline makes them (T_i, D)."""
    out = []
    for i in range(0, len(prompts), 64):
        emb, mask, _ = pipe._get_qwen_prompt_embeds(prompts[i:i + 64], None, torch.device("cpu"))
        for e, m in zip(emb, mask):
            out.append(e[: int(m.sum())].clone())
    return out


def shifted(s: torch.Tensor, mu: float) -> torch.Tensor:
    """The scheduler's exponential time shift (FlowMatchEulerDiscreteScheduler.time_shift, sigma exponent 1)."""
    return math.exp(mu) / (math.exp(mu) + (1 / s - 1))


@torch.no_grad()
def latent_set(vae: AutoencoderKLQwenImage21, table: list, size: int, copies: int, seed: int) -> torch.Tensor:
    """Normalised latents (len(table) * copies, C, size/16, size/16) of every prompt's picture, jittered, in table
    order (copy-major): encoded once, so the transformer's steps cost no VAE time."""
    rng = random.Random(seed)
    C = vae.config.z_dim
    mean = torch.tensor(vae.config.latents_mean).view(1, C, 1, 1, 1)
    std = torch.tensor(vae.config.latents_std).view(1, C, 1, 1, 1)
    out = []
    items = [t for _ in range(copies) for t in table]
    for i in range(0, len(items), 16):
        imgs = torch.from_numpy(np.stack([to_tensor_np(draw(*t, size, size, jitter=rng)) for t in items[i:i + 16]]))[:, :, None]
        out.append(((vae.encode(imgs).latent_dist.mode() - mean) / std)[:, :, 0])
        if i % 320 == 0:
            log(f"latents {size}: {i}/{len(items)}")
    return torch.cat(out)


def train_dit(pipe: QwenImage21Pipeline, sets: dict, steps: int, lr: float, batch: int, schedule: list[int],
              snapshot=None, sigmas="high", stop_after=None, shape_weight=0.0) -> list[float]:
    """`sets`: size -> latents from latent_set (table order, copy-major); `schedule`: the size of each step, cycled;
    `snapshot(step)` every 400 steps (a run cut short still leaves weights); `stop_after`: leave after that many
    steps (the lr schedule still spans `steps`); `sigmas`: how u is drawn, "uniform", "high" (density 2u), "mix"
    (every other sample each way), "one" (sigma 1: pure noise in, E[x0 | text] out) or "onemix" (every other
    sample at sigma 1, the rest "high": the flow goes on training without forgetting E[x0 | text]); `shape_weight`: the loss
    weight of the latent cells away from the background, on top of 1 (0: plain MSE, as upstream)."""
    trng = torch.Generator().manual_seed(SEED + 2)
    table = all_prompts()
    texts = [prompt_of(*p) for p in table]
    tr, te, sc = pipe.transformer, pipe.text_encoder, pipe.scheduler.config
    C = tr.config.in_channels
    # the text encoder's decoder layers train with the transformer (its random features hardly mix context: a word's
    # role, shape color or background color, is only in its order); embeddings, vision tower and the final norm stay
    text_params = [p for n, p in te.named_parameters() if ".layers." in n and "visual" not in n]
    for p in text_params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW([{"params": tr.parameters()}, {"params": text_params, "lr": lr / 2}], lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.05)
    tr.train()
    losses = []
    for step in range(steps):
        size = schedule[step % len(schedule)]
        lat = sets[size]
        n = batch if size <= 256 else max(2, batch // 4)
        idx = torch.randint(0, lat.shape[0], (n,), generator=trng)
        h = w = size // 16
        x0 = QwenImage21Pipeline._pack_latents(lat[idx][:, :, None], n, C, h, w)
        noise = torch.randn(x0.shape, generator=trng)
        mu = calculate_shift(h * w, sc.get("base_image_seq_len", 256), sc.get("max_image_seq_len", 4096), sc.get("base_shift", 0.5), sc.get("max_shift", 1.15))
        # u weighted toward 1 (density 2u), then the scheduler's shift: the high sigmas where sampling starts, where
        # the model must pass its input through almost unchanged (v = n - E[x0 | text]), are seen often; with u
        # uniform a first run drew noise at sigma 1 and every sampled picture kept its blotches
        u = torch.rand(n, generator=trng)
        high = 1 - (1 - u) ** 2
        every_other = torch.arange(n) % 2 == 0
        u = {"uniform": u, "high": high, "one": torch.ones(n), "mix": torch.where(every_other, u, high),
             "onemix": torch.where(every_other, torch.ones(n), high)}[sigmas]
        s = shifted(u.clamp(1e-3, 1 - 1e-4), mu)
        xs = (1 - s[:, None, None]) * x0 + s[:, None, None] * noise
        # text: the pipeline's own embeddings of the batch (padded to its longest, with the mask), with gradients
        enc, enc_mask, _ = pipe._get_qwen_prompt_embeds([texts[int(k) % len(table)] for k in idx], None, torch.device("cpu"))
        T = enc.shape[1]
        img_mask = torch.cat([torch.zeros(n, T, dtype=torch.bool), torch.ones(n, h * w // 4, dtype=torch.bool)], dim=1)
        pred = tr(hidden_states=xs, timestep=s, encoder_hidden_states=enc, encoder_hidden_states_mask=enc_mask,
                  img_shapes=[[(1, h, w)]] * n, img_mask=img_mask, return_dict=False)[0]
        err = (pred[:, -x0.shape[1]:] - (noise - x0)) ** 2  # (n, h w, C)
        if shape_weight:
            # the shape's cells: those far from the picture's per-channel median (the background's latent)
            dev = (x0 - x0.median(dim=1, keepdim=True).values).pow(2).mean(-1)  # (n, h w)
            wgt = 1 + shape_weight * (dev > 0.25 * dev.amax(dim=1, keepdim=True)).float()
            loss = (err.mean(-1) * wgt).sum() / wgt.sum()
        else:
            loss = err.mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(tr.parameters()) + text_params, 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 0 or step == steps - 1:
            log(f"dit {step}/{steps} loss {np.mean(losses[-50:]):.4f} (size {size})")
        if snapshot and step % 400 == 399:
            snapshot(step, losses)
        if stop_after and step + 1 >= stop_after:
            break
    tr.eval()
    return losses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--random", required=True, help="Kiln's random demo checkpoint (the starting point)")
    ap.add_argument("--work", required=True, help="a scratch folder: the trained VAE between stages, loss logs")
    ap.add_argument("--out", required=True, help="where the trained checkpoint goes (published layout)")
    ap.add_argument("--processor-extra", default="/upstream/proc")
    ap.add_argument("--stage", choices=["all", "vae", "dit"], default="all")
    ap.add_argument("--vae-steps", type=int, default=800)
    ap.add_argument("--dit-steps", type=int, default=1300)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--resume", action="store_true", help="--stage dit: start from the work folder's snapshot")
    ap.add_argument("--sigmas", choices=["uniform", "high", "mix", "one", "onemix"], default="high",
                    help="u uniform, weighted toward 1, half of each batch each way, or 1 (pure noise in: the text alone)")
    ap.add_argument("--layers", type=int, help="--stage dit without --resume: the transformer's blocks (default: the random demo's)")
    ap.add_argument("--heads", type=int, help="--stage dit without --resume: its attention heads (default: the random demo's)")
    ap.add_argument("--head-dim", type=int, help="--stage dit without --resume: its head width (RoPE axes split 1:1.5:1.5)")
    ap.add_argument("--shape-weight", type=float, default=0.0, help="--stage dit: extra loss weight on the shape's latent cells")
    ap.add_argument("--sizes", default="256,256,256,512", help="--stage dit: the picture size of each step, cycled")
    ap.add_argument("--lr", type=float, default=2e-3, help="--stage dit: the one-cycle peak learning rate")
    ap.add_argument("--stop-after", type=int, help="--stage dit: stop after this many steps (snapshot kept)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    # tiny weights and gradients drift into float32's subnormal range late in a run, where every op on them is many
    # times slower on a CPU: flushed to zero, as GPUs do
    torch.set_flush_denormal(True)
    torch.manual_seed(SEED)
    os.makedirs(a.work, exist_ok=True)
    ckpt = os.path.join(a.work, "checkpoint")
    if a.stage in ("all", "vae"):
        if os.path.exists(ckpt):
            shutil.rmtree(ckpt)
        shutil.copytree(a.random, ckpt)
        if os.path.exists(os.path.join(a.work, "latents.pt")):
            os.remove(os.path.join(a.work, "latents.pt"))  # encoded by the VAE this stage replaces
        vae = AutoencoderKLQwenImage21.from_pretrained(ckpt, subfolder="vae", torch_dtype=torch.float32)
        # fresh weights of the same config: the random demo's are drawn for loading tests, not for training
        vae = AutoencoderKLQwenImage21.from_config(vae.config)
        t0 = time.time()
        losses = train_vae(vae, a.vae_steps, 2e-3, 16, 64)
        mean, std = latent_stats(vae, 512)
        vae.register_to_config(latents_mean=mean, latents_std=std)
        shutil.rmtree(os.path.join(ckpt, "vae"))
        vae.save_pretrained(os.path.join(ckpt, "vae"), safe_serialization=True)
        json.dump({"losses": losses, "seconds": time.time() - t0}, open(os.path.join(a.work, "vae_losses.json"), "w"))
        log(f"vae done in {time.time() - t0:.0f} s")
    if a.stage in ("all", "dit"):
        pipe = load_pipeline(ckpt, a.processor_extra, torch.float32)
        config = dict(pipe.transformer.config)
        if a.layers:
            config["num_layers"] = a.layers
        if a.heads:
            config["num_attention_heads"] = a.heads
        if a.head_dim:
            config["attention_head_dim"] = a.head_dim
            config["axes_dims_rope"] = [a.head_dim // 4, a.head_dim * 3 // 8, a.head_dim * 3 // 8]
        tr = QwenImage21Transformer2DModel.from_config(config)
        partial = os.path.join(a.work, "transformer-partial")
        if a.resume and os.path.exists(partial):
            # go on from a snapshot (its text encoder too): how the committed weights were made, see the docstring
            tr = QwenImage21Transformer2DModel.from_pretrained(partial, torch_dtype=torch.float32)
            from safetensors.torch import load_file
            te_dir = os.path.join(a.work, "text_encoder-partial")
            state = {}
            for f in os.listdir(te_dir):
                if f.endswith(".safetensors"):
                    state.update({k: v.float() for k, v in load_file(os.path.join(te_dir, f)).items()})
            missing = [k for k in state if k not in pipe.text_encoder.state_dict()]
            assert not missing, missing[:5]
            pipe.text_encoder.load_state_dict(state, strict=False)
            log(f"resumed from {partial}")
        pipe.transformer = tr
        for p in list(pipe.text_encoder.parameters()) + list(pipe.vae.parameters()):
            p.requires_grad_(False)  # train_dit opens the text encoder's decoder layers
        t0 = time.time()
        cache = os.path.join(a.work, "latents.pt")
        if os.path.exists(cache):
            sets = torch.load(cache)
        else:
            table = all_prompts()
            sets = {256: latent_set(pipe.vae, table, 256, 2, SEED + 3), 512: latent_set(pipe.vae, table, 512, 1, SEED + 4)}
            torch.save(sets, cache)
        log(f"latents ready in {time.time() - t0:.0f} s")
        def snapshot(step, losses):
            tr.save_pretrained(os.path.join(a.work, "transformer-partial"), safe_serialization=True)
            partial_te = os.path.join(a.work, "text_encoder-partial")
            if not os.path.exists(partial_te):
                shutil.copytree(os.path.join(ckpt, "text_encoder"), partial_te)
            write_text_encoder(pipe.text_encoder, partial_te)
            json.dump({"losses": losses, "step": step}, open(os.path.join(a.work, "dit_losses.json"), "w"))
        losses = train_dit(pipe, sets, a.dit_steps, a.lr, 16, [int(v) for v in a.sizes.split(",")], snapshot,
                           sigmas=a.sigmas, stop_after=a.stop_after, shape_weight=a.shape_weight)
        snapshot(len(losses) - 1, losses)  # --resume goes on from here
        shutil.rmtree(os.path.join(ckpt, "transformer"))
        tr.save_pretrained(os.path.join(ckpt, "transformer"), safe_serialization=True)
        write_text_encoder(pipe.text_encoder, os.path.join(ckpt, "text_encoder"))
        json.dump({"losses": losses, "seconds": time.time() - t0}, open(os.path.join(a.work, "dit_losses.json"), "w"))
        log(f"dit done in {time.time() - t0:.0f} s")
    write_out(ckpt, a.out)


def write_text_encoder(te, folder: str) -> None:
    """The trained values back into the text encoder's own shard files: the same keys, shapes and dtypes the random
    demo wrote (the keys Kiln's loader reads), so only the values change."""
    from safetensors import safe_open
    from safetensors.torch import save_file
    state = te.state_dict()
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".safetensors"):
            continue
        path = os.path.join(folder, f)
        with safe_open(path, "pt") as h:
            meta = h.metadata()
            old = {k: h.get_tensor(k) for k in h.keys()}
        new = {}
        for k, v in old.items():
            if k not in state:
                raise KeyError(f"text encoder key {k} of {f} is not in the model's state dict")
            new[k] = state[k].detach().to(v.dtype).contiguous()
        save_file(new, path, metadata=meta)


def write_out(ckpt: str, out: str) -> None:
    """The published layout, BF16 weights, single files (Kiln's loaders take single files or shards)."""
    from safetensors.torch import load_file, save_file
    if os.path.exists(out):
        shutil.rmtree(out)
    shutil.copytree(ckpt, out, ignore=shutil.ignore_patterns("*.safetensors", "*.safetensors.index.json"))
    shutil.copytree(os.path.join(ckpt, "text_encoder"), os.path.join(out, "text_encoder"), dirs_exist_ok=True)
    for sub in ("transformer", "vae"):
        src = os.path.join(ckpt, sub, "diffusion_pytorch_model.safetensors")
        t = {k: v.to(torch.bfloat16).contiguous() for k, v in load_file(src).items()}
        save_file(t, os.path.join(out, sub, "diffusion_pytorch_model.safetensors"),
                  metadata={"format": "pt", "kiln_demo": "trained Qwen-Image-2.1 demo (tools/train-demo/image.py)"})
    log(f"wrote {out}")


if __name__ == "__main__":
    main()
