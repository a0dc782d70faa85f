"""Stand-in for the parts of librosa that Qwen3-TTS touches, for the golden-vector generator only.

The reference lab has no librosa. Upstream imports it at module level (modeling_qwen3_tts.py needs
`librosa.filters.mel`; the inference wrappers need `librosa.load` / `librosa.resample`, which the
generator never calls). `filters.mel` is our own implementation of the Slaney-scale, Slaney-normed
mel filterbank that librosa computes by default (htk=False, norm="slaney", dtype float32).
"""
from . import filters  # noqa: F401


def _absent(name):
    def fail(*_args, **_kwargs):
        raise NotImplementedError(f"librosa.{name} is not available in the golden-vector shim")

    return fail


load = _absent("load")
resample = _absent("resample")
