"""Stand-in for soundfile: upstream imports it at module level; the golden generator never reads files."""


def read(*_args, **_kwargs):
    raise NotImplementedError("soundfile is not available in the golden-vector shim")
