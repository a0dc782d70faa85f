"""Golden vectors for LoRAs on Krea 2 (issue 46): the tiny Krea 2 DiT with LoRA files applied by diffusers' own
loader (Krea2LoraLoaderMixin, the code behind Krea2Pipeline.load_lora_weights, on PEFT), in each key style.

Upstream (read, never copied into this repository):
  huggingface/diffusers @ 58eb52c0803ea9af3abec60841c2a093bdf1f951: models/transformers/transformer_krea2.py
      (Krea2Transformer2DModel), loaders/lora_pipeline.py (Krea2LoraLoaderMixin.lora_state_dict /
      load_lora_into_transformer), loaders/lora_conversion_utils.py (_convert_non_diffusers_krea2_lora_to_diffusers),
      loaders/peft.py (load_lora_adapter, set_adapters)
  huggingface/peft @ 5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40 (src/peft: the LoRA layers diffusers injects)
  krea-ai/krea-2 @ db3984fbc6e13b34c0064990fc2d95ac64d00058 mmdit.py, sampling.py (the base model, as krea2.py)
Fetch them and unpack outside the repository, then run from the checkout, as root:

  mkdir -p /tmp/lora-diffusers /tmp/peft-up /tmp/krea2-up
  git -C <mirror of huggingface/diffusers> archive HEAD src | tar -x -C /tmp/lora-diffusers
  git -C <mirror of huggingface/peft> archive HEAD src | tar -x -C /tmp/peft-up
  git -C <mirror of krea-ai/krea-2> archive HEAD mmdit.py sampling.py | tar -x -C /tmp/krea2-up
  # peft from source has no package metadata, and diffusers finds its PEFT backend by that metadata:
  mkdir -p /tmp/peft-up/src/peft-0.20.1.dev0.dist-info
  printf 'Metadata-Version: 2.1\nName: peft\nVersion: 0.20.1.dev0\n' > /tmp/peft-up/src/peft-0.20.1.dev0.dist-info/METADATA
  cd /work/main && bash /work/shared/tools/reflab/run.sh -u krea2=/tmp/krea2-up -u diffusers=/tmp/lora-diffusers/src \
      -u peft=/tmp/peft-up/src -- python3 /project/tools/golden/krea2_lora.py --out /project/test/fixtures/golden

The base model is krea2.py's tiny SingleStreamDiT (random weights, native keys: what Kiln loads). Its state dict is
renamed to diffusers' Krea2Transformer2DModel (shared/spec/krea2.md key table; mod.lin reshaped to (6, F)) and
loaded strict; the generator checks that diffusers' forward equals the native one before any LoRA is applied.

Writes test/fixtures/golden/krea2/lora/<case>.safetensors (format: shared spec models.md, "Golden vectors"):
  weight.*              the native checkpoint keys (as krea2/transformer/)
  input.latents, input.context (taps), input.t      as krea2/transformer/ (batch 1, every text token valid)
  input.lora.<i>.<key>  the i-th LoRA file's tensors under their own keys (the test writes them back to a file)
  config.loras          [{"style", "scale"}] per file, in the order they are applied
  output.base           the velocity without LoRA, output.sample with the LoRAs (both (1, N, C p^2))
Cases:
  diffusers_peft        a diffusers-named file (transformer.<diffusers module>.lora_A/B, no alpha, rank 3) at
                        scale 0.8: Krea2Pipeline.load_lora_weights' path, then set_adapters(weights=0.8)
  kohya_alpha           a kohya file (lora_unet_<native module with _>.lora_down/up + alpha 2 at rank 4) at scale 1.
                        diffusers has no kohya reader for Krea 2: the generator renames the modules (underscores to
                        the native dotted names, then diffusers' own native -> diffusers conversion) and hands the
                        alphas to load_lora_adapter as network_alphas, diffusers' path for kohya alphas
  two_loras             a native-named file (diffusion_model.<native module>.lora_A/B, what the reference trainer and
                        ComfyUI write; converted by diffusers' lora_state_dict) at 0.7 plus a kohya file at -0.5,
                        both active (set_adapters([a, b], weights=[0.7, -0.5]))
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import krea2 as K  # noqa: E402  (the base model and inputs, as the transformer fixtures make them)
from common import diffusers_upstream, lowp, record_f16, write_case  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from diffusers.loaders.lora_conversion_utils import _convert_non_diffusers_krea2_lora_to_diffusers  # noqa: E402
from diffusers.loaders.lora_pipeline import Krea2LoraLoaderMixin  # noqa: E402
from diffusers.models.transformers.transformer_krea2 import Krea2Transformer2DModel  # noqa: E402

import sampling  # noqa: E402

MODEL = "krea2"
UPSTREAM = (diffusers_upstream("58eb52c0803ea9af3abec60841c2a093bdf1f951") +
            " transformer_krea2.py + Krea2LoraLoaderMixin; peft 5d602fdbff04 " +
            "; base: krea-ai/krea-2@db3984fbc6e1 mmdit.py")
TMP = "/tmp/kiln-krea2-lora"

ATTN = {"wq": "to_q", "wk": "to_k", "wv": "to_v", "gate": "to_gate", "wo": "to_out.0"}


def to_diffusers(sd, cfg):
    """The native state dict under diffusers' Krea2Transformer2DModel keys (shared/spec/krea2.md, key table)."""
    F = cfg["features"]
    out = {}
    top = {"first": "img_in", "tmlp.0": "time_embed.linear_1", "tmlp.2": "time_embed.linear_2", "tproj.1": "time_mod_proj",
           "txtmlp.1": "txt_in.linear_1", "txtmlp.3": "txt_in.linear_2", "last.linear": "final_layer.linear"}

    def block(rest):
        parts = rest.split(".")
        if parts[0] == "prenorm":
            return "norm1.weight"
        if parts[0] == "postnorm":
            return "norm2.weight"
        if parts[0] == "attn" and parts[1] == "qknorm":
            return f"attn.norm_{parts[2][0]}.weight"
        if parts[0] == "attn":
            return f"attn.{ATTN[parts[1]]}.weight"
        if parts[0] == "mlp":
            return f"ff.{parts[1]}.weight"
        raise KeyError(rest)

    for k, v in sd.items():
        if k.startswith("blocks."):
            _, i, rest = k.split(".", 2)
            if rest == "mod.lin":
                out[f"transformer_blocks.{i}.scale_shift_table"] = v.reshape(6, F)
            else:
                out[f"transformer_blocks.{i}.{block(rest)}"] = v
        elif k.startswith("txtfusion."):
            rest = k[len("txtfusion."):]
            if rest.startswith("projector"):
                out["text_fusion." + rest] = v
            else:
                stage, i, r = rest.split(".", 2)
                out[f"text_fusion.{stage}.{i}.{block(r)}"] = v
        elif k == "txtmlp.0.scale":
            out["txt_in.norm.weight"] = v
        elif k == "last.norm.scale":
            out["final_layer.norm.weight"] = v
        elif k == "last.modulation.lin":
            out["final_layer.scale_shift_table"] = v
        else:
            mod, p = k.rsplit(".", 1)
            out[f"{top[mod]}.{p}"] = v
    return out


def diffusers_model(native, cfg):
    sd = native.state_dict()
    hd = cfg["features"] // cfg["heads"]
    txthd = cfg["txtdim"] // cfg["txtheads"]
    axes = [hd - 12 * (hd // 16), 6 * (hd // 16), 6 * (hd // 16)]
    m = Krea2Transformer2DModel(
        in_channels=cfg["channels"] * cfg["patch"] ** 2, num_layers=cfg["layers"], attention_head_dim=hd,
        num_attention_heads=cfg["heads"], num_key_value_heads=cfg["kvheads"],
        intermediate_size=sd["blocks.0.mlp.gate.weight"].shape[0], timestep_embed_dim=cfg["tdim"],
        text_hidden_dim=cfg["txtdim"], num_text_layers=cfg["txtlayers"], text_num_attention_heads=cfg["txtheads"],
        text_num_key_value_heads=cfg["txtkvheads"],
        text_intermediate_size=sd["txtfusion.layerwise_blocks.0.mlp.gate.weight"].shape[0],
        num_layerwise_text_blocks=2, num_refiner_text_blocks=2, axes_dims_rope=tuple(axes), rope_theta=cfg["theta"])
    assert txthd * cfg["txtheads"] == cfg["txtdim"]
    m.load_state_dict(to_diffusers(sd, cfg), strict=True)
    return m.eval()


def native_modules(native):
    """Every Linear of the native DiT by its module name."""
    return [n for n, mod in native.named_modules() if isinstance(mod, torch.nn.Linear)]


def pick_modules(native, gen, n):
    names = native_modules(native)
    order = torch.randperm(len(names), generator=gen).tolist()
    blocks = [names[i] for i in order if names[i].startswith("blocks.")]
    rest = [names[i] for i in order if not names[i].startswith("blocks.")]
    return sorted(blocks[: n - 3] + rest[:3])  # mostly block linears, a few of the others


def lora_pair(native, module, rank, gen, amp):
    lin = native.get_submodule(module)
    N, Kin = lin.weight.shape
    down = (torch.rand(rank, Kin, generator=gen) * 2 - 1) * amp / Kin ** 0.5
    up = (torch.rand(N, rank, generator=gen) * 2 - 1) * amp / rank ** 0.5
    return down, up


def diffusers_name(native_module):
    d = _convert_non_diffusers_krea2_lora_to_diffusers({f"diffusion_model.{native_module}.lora_A.weight": torch.zeros(1)})
    (k,) = d.keys()
    return k[: -len(".lora_A.weight")]  # "transformer.<diffusers module>"


def make_file(native, style, modules, rank, gen, amp, alpha=None):
    """(the file's tensors, what diffusers' loader is given: (state dict, network_alphas or None))."""
    tensors, sd, alphas = {}, {}, {}
    for m in modules:
        down, up = lora_pair(native, m, rank, gen, amp)
        dname = diffusers_name(m)
        if style == "diffusers":
            tensors[f"{dname}.lora_A.weight"], tensors[f"{dname}.lora_B.weight"] = down, up
        elif style == "native":
            tensors[f"diffusion_model.{m}.lora_A.weight"], tensors[f"diffusion_model.{m}.lora_B.weight"] = down, up
        elif style == "kohya":
            k = "lora_unet_" + m.replace(".", "_")
            tensors[f"{k}.lora_down.weight"], tensors[f"{k}.lora_up.weight"] = down, up
            tensors[f"{k}.alpha"] = torch.tensor(float(alpha))
            sd[f"diffusion_model.{m}.lora_A.weight"], sd[f"diffusion_model.{m}.lora_B.weight"] = down, up
            alphas[f"{dname}.alpha"] = float(alpha)
    return tensors, (sd, alphas)


def load(dm, tensors, style, loader_input, name):
    """The file through diffusers' loader, as Krea2Pipeline.load_lora_weights drives it (kohya: see the docstring)."""
    os.makedirs(TMP, exist_ok=True)
    path = os.path.join(TMP, f"{name}.safetensors")
    save_file({k: v.contiguous() for k, v in tensors.items()}, path)
    if style == "kohya":
        sd, alphas = loader_input
        sd = Krea2LoraLoaderMixin.lora_state_dict(sd)  # diffusers' native -> diffusers renaming
        dm.load_lora_adapter(sd, prefix="transformer", network_alphas=alphas, adapter_name=name)
    else:
        sd = Krea2LoraLoaderMixin.lora_state_dict(path)
        Krea2LoraLoaderMixin.load_lora_into_transformer(sd, transformer=dm, adapter_name=name)


def lora_case(out, case, seed, files, h=2, w=3, prompt=6, **over):
    """files: [(style, scale, rank, alpha, modules)]."""
    cfg, native, gen = K.build(seed, **over)
    latents, taps, mask = K.transformer_inputs(gen, cfg, 1, prompt, 0, h, w)
    tt = torch.full((1,), 0.6)
    img, pos, full_mask = sampling.prepare(latents, taps.shape[1], cfg["patch"], mask)
    with torch.no_grad():
        want = native(img=img, context=taps, t=tt, pos=pos, mask=full_mask)
        dm = diffusers_model(native, cfg)
        got = dm(hidden_states=img, encoder_hidden_states=taps, timestep=tt, position_ids=pos[0]).sample
    if not torch.allclose(got, want, atol=1e-5, rtol=1e-5):
        raise SystemExit(f"{case}: diffusers' Krea 2 differs from the native model ({(got - want).abs().max()}): check to_diffusers")
    inputs = {"latents": latents, "context": taps, "t": tt}
    names, scales, styles = [], [], []
    for i, (style, scale, rank, alpha, n) in enumerate(files):
        modules = pick_modules(native, gen, n)
        tensors, loader_input = make_file(native, style, modules, rank, gen, 0.6, alpha)
        for k, v in tensors.items():
            inputs[f"lora.{i}.{k}"] = v
        load(dm, tensors, style, loader_input, f"l{i}")
        names.append(f"l{i}")
        scales.append(scale)
        styles.append(style)
    dm.set_adapters(names, weights=scales)
    run = lowp(dm)
    with torch.no_grad(), K.float64_throughout():
        sample = run(hidden_states=lowp(img), encoder_hidden_states=lowp(taps), timestep=lowp(tt, f32=True),
                     position_ids=lowp(pos[0], f32=True)).sample
        run.disable_lora()
        base = run(hidden_states=lowp(img), encoder_hidden_states=lowp(taps), timestep=lowp(tt, f32=True),
                   position_ids=lowp(pos[0], f32=True)).sample
    if torch.allclose(sample.float(), base.float(), atol=1e-3):
        raise SystemExit(f"{case}: the LoRAs change nothing; make them larger")
    cfg = dict(cfg, loras=[{"style": s, "scale": sc} for s, sc in zip(styles, scales)])
    write_case(out, MODEL, "lora", case, weights=dict(native.state_dict()), inputs=inputs,
               outputs={"sample": sample, "base": base}, config=cfg, upstream=UPSTREAM, seed=seed)


def main(out):
    lora_case(out, "diffusers_peft", 11, [("diffusers", 0.8, 3, None, 12)])
    lora_case(out, "kohya_alpha", 12, [("kohya", 1.0, 4, 2.0, 12)])
    lora_case(out, "two_loras", 13, [("native", 0.7, 2, None, 10), ("kohya", -0.5, 4, 8.0, 10)])


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    record_f16(lambda: main(a.out))
