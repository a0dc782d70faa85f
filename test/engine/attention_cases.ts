// The attention cases both kernels are checked on (test/engine/attention.test.ts: the flash kernel, every case;
// attention_subgroup.test.ts: the tensor-core one, every case whose head dim its matrix config divides). A case
// added here runs in both with no other change.
import type { AttentionMask } from '../../src/engine/ops/attention';

export interface AttentionCase {
  B: number; Hq: number; Hkv: number; Lq: number; Lk: number; D: number;
  mask: AttentionMask; queryOffset?: number; kvLen?: number; block?: number; tile?: { bq: number; bkv: number };
  window?: number;
}
export const ATTENTION_CASES: AttentionCase[] = [
  { B: 1, Hq: 4, Hkv: 2, Lq: 7, Lk: 7, D: 16, mask: 'none' },
  { B: 2, Hq: 2, Hkv: 1, Lq: 33, Lk: 33, D: 40, mask: 'causal' },
  { B: 1, Hq: 3, Hkv: 3, Lq: 1, Lk: 130, D: 64, mask: 'causal', queryOffset: 129 }, // decode one token
  { B: 1, Hq: 2, Hkv: 1, Lq: 7, Lk: 33, D: 16, mask: 'causal', queryOffset: 26, tile: { bq: 4, bkv: 4 } }, // chunked prefill
  { B: 1, Hq: 4, Hkv: 1, Lq: 130, Lk: 130, D: 128, mask: 'block_causal', block: 13 },
  { B: 2, Hq: 2, Hkv: 2, Lq: 5, Lk: 33, D: 7, mask: 'none', kvLen: 20 }, // padded cache, odd head dim
  { B: 1, Hq: 2, Hkv: 1, Lq: 3, Lk: 7, D: 16, mask: 'causal', kvLen: 0 }, // nothing visible: zeros
  { B: 1, Hq: 4, Hkv: 2, Lq: 33, Lk: 33, D: 16, mask: 'causal', window: 5, tile: { bq: 8, bkv: 4 } }, // window across tiles
  { B: 1, Hq: 2, Hkv: 2, Lq: 130, Lk: 130, D: 64, mask: 'causal', window: 72 }, // the Qwen3-TTS codec's window
  { B: 1, Hq: 2, Hkv: 1, Lq: 7, Lk: 130, D: 16, mask: 'causal', queryOffset: 123, window: 9 }, // chunk after a cache
  { B: 1, Hq: 2, Hkv: 2, Lq: 7, Lk: 7, D: 8, mask: 'causal', window: 1 }, // each query sees itself only
  { B: 1, Hq: 2, Hkv: 1, Lq: 33, Lk: 33, D: 16, mask: 'none', window: 4 }, // left-limited, sees the future
];
