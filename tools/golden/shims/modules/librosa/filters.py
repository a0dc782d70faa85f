"""Slaney mel filterbank (what librosa.filters.mel returns with its defaults).

Mel scale (Slaney / Auditory Toolbox): linear below 1 kHz (200/3 Hz per mel), logarithmic above
(step log(6.4)/27 per mel). Filters are triangles between consecutive band edges on the FFT bin
frequencies linspace(0, sr/2, n_fft//2+1); each triangle is scaled by 2 / (upper edge - lower edge)
so that every band has about the same energy ("slaney" norm). Edges in float64, result in float32.
"""
import numpy as np

_F_SP = 200.0 / 3.0
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP
_LOGSTEP = np.log(6.4) / 27.0


def hz_to_mel(hz):
    hz = np.asanyarray(hz, dtype=np.float64)
    mel = hz / _F_SP
    return np.where(hz >= _MIN_LOG_HZ, _MIN_LOG_MEL + np.log(np.maximum(hz, 1e-300) / _MIN_LOG_HZ) / _LOGSTEP, mel)


def mel_to_hz(mel):
    mel = np.asanyarray(mel, dtype=np.float64)
    hz = _F_SP * mel
    return np.where(mel >= _MIN_LOG_MEL, _MIN_LOG_HZ * np.exp(_LOGSTEP * (mel - _MIN_LOG_MEL)), hz)


def mel(*, sr, n_fft, n_mels=128, fmin=0.0, fmax=None, htk=False, norm="slaney", dtype=np.float32):
    if htk or norm != "slaney":
        raise NotImplementedError("shim implements only htk=False, norm='slaney'")
    if fmax is None:
        fmax = float(sr) / 2
    fft_freqs = np.linspace(0, float(sr) / 2, 1 + n_fft // 2)
    edges = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    fdiff = np.diff(edges)
    ramps = edges[:, None] - fft_freqs[None, :]
    weights = np.zeros((n_mels, 1 + n_fft // 2), dtype=dtype)
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    weights *= (2.0 / (edges[2 : n_mels + 2] - edges[:n_mels]))[:, None]
    return weights
