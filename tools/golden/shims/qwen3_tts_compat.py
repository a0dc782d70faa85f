"""Import Qwen3-TTS (pinned to transformers 4.57.3) under the reference lab's transformers 5.12.

Only what the tiny-config golden runs touch is patched; every patch says what changed upstream-side.
Nothing here changes the maths of the upstream modules: masks and RoPE frequencies are rebuilt
exactly as transformers 4.57.3 builds them for these models (eager attention, causal, optional
sliding window, default RoPE).
"""
import functools
import importlib
import os
import sys
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
UPSTREAM = os.environ.get("QWEN3_TTS_UPSTREAM", "/upstream/qwen3tts")


def _install_module_shims():
    # librosa and soundfile are absent from the lab; our stand-ins live in tools/golden/shims/modules.
    # transformers checks for librosa when audio_utils is first imported (and then wants soxr too),
    # so everything of transformers that upstream uses is imported before the stand-ins appear.
    import transformers.audio_utils  # noqa: F401
    import transformers.models.mimi.modeling_mimi  # noqa: F401
    import transformers.generation  # noqa: F401
    sys.path.insert(0, os.path.join(HERE, "modules"))


def _patch_transformers():
    import transformers.modeling_rope_utils as rope_utils
    import transformers.utils.generic as generic

    # 5.x dropped the "default" entry (RoPE defaults moved into each model). 4.57.3's
    # _compute_default_rope_parameters: inv_freq = 1 / theta^(arange(0, dim, 2) / dim), scaling 1.0,
    # dim = head_dim (config.head_dim, else hidden_size // num_attention_heads) * partial_rotary_factor.
    def default_rope(config, device=None, seq_len=None, layer_type=None):
        params = getattr(config, "rope_parameters", None) or {}
        base = getattr(config, "rope_theta", None) or params.get("rope_theta")
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        dim = int(head_dim * getattr(config, "partial_rotary_factor", 1.0))
        inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / dim))
        return inv, 1.0

    rope_utils.ROPE_INIT_FUNCTIONS.setdefault("default", default_rope)

    # 4.57 `check_model_inputs()` was a decorator factory; 5.x takes the function directly.
    original = generic.check_model_inputs

    def check_model_inputs(*args, **kwargs):
        if args and callable(args[0]):
            return original(args[0])
        return lambda fn: fn

    generic.check_model_inputs = check_model_inputs


def legacy_config_defaults(config):
    """4.57's PretrainedConfig gave every config pad/bos/eos token ids (None by default); 5.x does not,
    and upstream reads config.pad_token_id. Eager attention everywhere (what the masks above are for)."""
    for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if not hasattr(config, name):
            setattr(config, name, None)
    config._attn_implementation = "eager"


def additive_causal_mask(config, input_embeds=None, attention_mask=None, cache_position=None,
                         past_key_values=None, position_ids=None, inputs_embeds=None, **_):
    """4D float mask (B, 1, q, kv) as 4.57's create_causal_mask / create_sliding_window_causal_mask
    give eager attention: key j visible to query i iff j <= i (absolute positions), j > i - window
    when the config has a sliding window, and attention_mask[b, j] == 1 when a 2D mask is given."""
    x = input_embeds if input_embeds is not None else inputs_embeds
    bsz, q_len = x.shape[0], x.shape[1]
    past = past_key_values.get_seq_length() if past_key_values is not None else 0
    if cache_position is None:
        cache_position = torch.arange(past, past + q_len)
    kv_len = past + q_len
    q_pos = cache_position.view(-1, 1)
    k_pos = torch.arange(kv_len).view(1, -1)
    allowed = k_pos <= q_pos
    window = getattr(config, "sliding_window", None)
    if window is not None:
        allowed = allowed & (k_pos > q_pos - window)
    allowed = allowed.view(1, 1, q_len, kv_len).expand(bsz, 1, q_len, kv_len)
    if attention_mask is not None and attention_mask.ndim == 2:
        allowed = allowed & attention_mask[:, None, None, :kv_len].bool()
    mask = torch.zeros(allowed.shape, dtype=x.dtype)
    return mask.masked_fill(~allowed, torch.finfo(x.dtype).min)


def _supply_cache_position(cls):
    """4.57's generate() passed cache_position to every forward; 5.x does not. The talker's forward reads
    it to tell the prefill (positions from get_rope_index) from a decode step (cache length + deltas),
    so without it every decode step would be treated as a new prefill. Same value 4.57 passed:
    arange(cache length, cache length + new tokens)."""
    forward = cls.forward

    @functools.wraps(forward)
    def with_cache_position(self, *args, **kwargs):
        if kwargs.get("cache_position") is None:
            pkv = kwargs.get("past_key_values")
            x = kwargs.get("inputs_embeds")
            if x is None:
                x = kwargs.get("input_ids")
            past = pkv.get_seq_length() if pkv is not None else 0
            kwargs["cache_position"] = torch.arange(past, past + x.shape[1])
        return forward(self, *args, **kwargs)

    cls.forward = with_cache_position


def _package(name, path):
    # Register a package without running its __init__ (qwen_tts/__init__ pulls the whole inference
    # stack, which needs librosa/soundfile and a hub download path we never use).
    mod = types.ModuleType(name)
    mod.__path__ = [path]
    sys.modules[name] = mod
    return mod


def load_upstream():
    """Returns a namespace with the upstream modules: model, config, tok (12 Hz tokenizer v2)."""
    _install_module_shims()
    _patch_transformers()
    root = os.path.join(UPSTREAM, "qwen_tts")
    _package("qwen_tts", root)
    _package("qwen_tts.core", os.path.join(root, "core"))
    _package("qwen_tts.core.models", os.path.join(root, "core", "models"))
    _package("qwen_tts.core.tokenizer_12hz", os.path.join(root, "core", "tokenizer_12hz"))
    _package("qwen_tts.inference", os.path.join(root, "inference"))
    # modeling_qwen3_tts imports ...inference.qwen3_tts_tokenizer, which imports `..core` names.
    core = sys.modules["qwen_tts.core"]
    tok_cfg = importlib.import_module("qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2")
    tok = importlib.import_module("qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2")
    core.Qwen3TTSTokenizerV2Config = tok_cfg.Qwen3TTSTokenizerV2Config
    core.Qwen3TTSTokenizerV2Model = tok.Qwen3TTSTokenizerV2Model
    core.Qwen3TTSTokenizerV1Config = None  # the 25 Hz tokenizer is not part of the 12 Hz models
    core.Qwen3TTSTokenizerV1Model = None
    cfg = importlib.import_module("qwen_tts.core.models.configuration_qwen3_tts")
    model = importlib.import_module("qwen_tts.core.models.modeling_qwen3_tts")
    # 5.x renamed create_causal_mask's arguments (input_embeds -> inputs_embeds, no cache_position);
    # upstream calls the 4.57 signature. Same mask, built directly.
    for mod in (model, tok):
        mod.create_causal_mask = additive_causal_mask
        mod.create_sliding_window_causal_mask = additive_causal_mask
    _supply_cache_position(model.Qwen3TTSTalkerForConditionalGeneration)
    _supply_cache_position(model.Qwen3TTSTalkerCodePredictorModelForConditionalGeneration)
    return types.SimpleNamespace(model=model, config=cfg, tok=tok, tok_config=tok_cfg)


def load_inference(u):
    """The inference wrappers (qwen_tts.inference: Qwen3TTSModel, Qwen3TTSTokenizer) on top of load_upstream(u), for
    from_pretrained on a checkpoint folder (the end-to-end golden, tools/golden/qwen3_tts_pipeline.py). Two more
    5.x adaptations: qwen_tts.core.models gets the names its __init__ would export (the package is registered without
    running it, see _package), and every config class the checkpoint's config.json instantiates gets
    legacy_config_defaults after its __init__ (pad/bos/eos ids and eager attention, as build_tts sets them by hand);
    integers given for float fields become floats (5.x's strict config dataclasses refuse `"trim_right_ratio": 1`,
    which 4.57 took); the 25 Hz tokenizer's Auto registration gets placeholders."""
    from transformers import MimiConfig, PretrainedConfig, PreTrainedModel

    # The 25 Hz tokenizer is not loaded (load_upstream leaves it None), but Qwen3TTSTokenizer.from_pretrained
    # registers it with the Auto classes: placeholders that never build anything.
    class Absent25HzConfig(PretrainedConfig):
        model_type = "qwen3_tts_tokenizer_25hz"

    class Absent25HzModel(PreTrainedModel):
        config_class = Absent25HzConfig

    tokenizer = importlib.import_module("qwen_tts.inference.qwen3_tts_tokenizer")
    tokenizer.Qwen3TTSTokenizerV1Config, tokenizer.Qwen3TTSTokenizerV1Model = Absent25HzConfig, Absent25HzModel
    models = sys.modules["qwen_tts.core.models"]
    models.Qwen3TTSConfig = u.config.Qwen3TTSConfig
    models.Qwen3TTSForConditionalGeneration = u.model.Qwen3TTSForConditionalGeneration
    models.Qwen3TTSProcessor = importlib.import_module("qwen_tts.core.models.processing_qwen3_tts").Qwen3TTSProcessor
    classes = [u.config.Qwen3TTSConfig, u.config.Qwen3TTSTalkerConfig, u.config.Qwen3TTSTalkerCodePredictorConfig,
               u.config.Qwen3TTSSpeakerEncoderConfig, u.tok_config.Qwen3TTSTokenizerV2Config,
               u.tok_config.Qwen3TTSTokenizerV2DecoderConfig, MimiConfig]
    for cls in classes:
        init = cls.__init__

        floats = {k for k, t in getattr(cls, "__annotations__", {}).items() if t is float or t == "float"}

        @functools.wraps(init)
        def with_defaults(self, *args, __init=init, __floats=floats, **kwargs):
            # 5.x validates typed config fields strictly; a JSON writer may put 1.0 as 1 (4.57 took either)
            kwargs = {k: float(v) if k in __floats and type(v) is int else v for k, v in kwargs.items()}
            __init(self, *args, **kwargs)
            legacy_config_defaults(self)

        cls.__init__ = with_defaults
    # 5.x initialises after loading and skips a module only when its params carry `_is_hf_initialized`, which holds
    # for torch.nn.init calls but not for in-place `.data.normal_()` as upstream's _init_weights writes them; 5.x
    # makes that exception for trust_remote_code models (is_remote_code), and upstream's modules are remote code in
    # that sense (4.57 initialised before loading). Without this every loaded weight is re-drawn at random.
    # 5.x also builds the model on the meta device and leaves non-persistent buffers to _init_weights: its own
    # recomputes RotaryEmbedding's inv_freq, upstream's overrides (written for 4.57, which computed inv_freq in
    # __init__ on a real device) do not, so inv_freq was left as uninitialised memory (garbage, sometimes NaN: the
    # talker and code predictor then picked other codes on every load). It is computed again here exactly as
    # upstream's __init__ does: rope_init_fn(config) (float32, as 4.57 on the CPU).
    for mod in (u.model, u.tok):
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, PreTrainedModel) and obj.__module__ == mod.__name__:
                def as_remote_code(self, module, is_remote_code=False, __base=PreTrainedModel._initialize_weights):
                    return __base(self, module, is_remote_code=True)

                def with_rope(self, module, __init=obj._init_weights):
                    __init(self, module)
                    if hasattr(module, "rope_init_fn") and isinstance(getattr(module, "inv_freq", None), torch.Tensor):
                        inv_freq, _ = module.rope_init_fn(module.config, None)
                        with torch.no_grad():
                            module.inv_freq.copy_(inv_freq)
                        module.original_inv_freq = module.inv_freq

                obj._initialize_weights = as_remote_code
                obj._init_weights = with_rope
    return importlib.import_module("qwen_tts.inference.qwen3_tts_model")
