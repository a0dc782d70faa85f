// KV cache for Qwen3 decoding: one (B, Hkv, capacity, D) key and value tensor per layer, allocated once, so a
// decode step (one token) creates no GPU buffer after warm-up. Padding tokens (a prompt's left padding) are
// tracked as block ids: token r of the real tokens gets id r, padding gets PAD_BLOCK, and the block-causal mask
// (key j visible to query i when id[j] <= id[i]) then hides padding from every real token.
import type { Engine } from '../../engine/engine';
import type { Tensor } from '../../engine/tensor';
import type { Qwen3Config } from './config';
import type { LayerCache } from './layer';
import type { ComputeDType } from '../common/weights';

/** Block id of a padding position: above every real token's id (f32 holds it exactly). */
export const PAD_BLOCK = 2 ** 30;

export interface KvCacheOptions {
  batch?: number;
  /** Most tokens the cache holds (prompt + generated). */
  capacity: number;
  dtype: ComputeDType;
  /** Layers cached (default the config's; a truncated model caches only the layers it runs). */
  layers?: number;
}

export class Qwen3KvCache {
  readonly layers: LayerCache[] = [];
  readonly batch: number;
  readonly capacity: number;
  readonly dtype: ComputeDType;
  /** Tokens stored. */
  length = 0;
  /** Host copy of the block ids; the GPU copy exists once a padding token has been seen. */
  private readonly ids: Float32Array;
  private realTokens = 0;
  blockIds: Tensor | null = null;

  constructor(
    private readonly e: Engine,
    cfg: Qwen3Config,
    o: KvCacheOptions,
  ) {
    this.batch = o.batch ?? 1;
    this.capacity = o.capacity;
    this.dtype = o.dtype;
    if (!Number.isInteger(o.capacity) || o.capacity < 1) throw new RangeError(`Qwen3KvCache: capacity ${o.capacity}`);
    const shape = [this.batch, cfg.numKvHeads, o.capacity, cfg.headDim];
    const n = o.layers ?? cfg.numLayers;
    try {
      // kept out of the scope they are made in (engine/scope.ts): the cache outlives it, free() frees them
      for (let i = 0; i < n; i++) this.layers.push(e.keep({ k: e.empty(shape, o.dtype, `kv cache k${i}`), v: e.empty(shape, o.dtype, `kv cache v${i}`) }));
    } catch (err) {
      this.free();
      throw err;
    }
    this.ids = new Float32Array(o.capacity);
  }

  /**
   * Reserves slots for `n` new tokens and records which are padding (keep[i] = 0). Returns the first slot and
   * the block-id tensor when the cache holds any padding (the caller then masks block-causally).
   */
  append(n: number, keep?: ArrayLike<number>): { start: number; blockIds?: Tensor } {
    const start = this.length;
    if (start + n > this.capacity) throw new RangeError(`Qwen3KvCache: ${start} + ${n} tokens exceed the capacity ${this.capacity}`);
    if (keep && keep.length !== n) throw new RangeError(`Qwen3KvCache: padding mask has ${keep.length} flags for ${n} tokens`);
    let padded = false;
    for (let i = 0; i < n; i++) {
      const real = !keep || keep[i] !== 0;
      this.ids[start + i] = real ? this.realTokens++ : PAD_BLOCK;
      padded ||= !real;
    }
    if (padded && !this.blockIds) {
      this.blockIds = this.e.keep(this.e.empty([this.capacity], 'f32', 'kv cache block ids')); // made inside a forward's scope, kept for the cache's life
      this.e.write(this.blockIds, this.ids); // slots past the end are rewritten before they are read
    } else if (this.blockIds) {
      this.e.writeBytes(this.blockIds, start * 4, new Uint8Array(this.ids.buffer, start * 4, n * 4));
    }
    this.length = start + n;
    return { start, blockIds: this.blockIds ?? undefined };
  }

  /** Forgets every token (the buffers are kept). */
  reset(): void {
    this.length = 0;
    this.realTokens = 0;
    this.blockIds?.free();
    this.blockIds = null;
  }

  free(): void {
    for (const l of this.layers) {
      l.k.free();
      l.v.free();
    }
    this.layers.length = 0;
    this.blockIds?.free();
    this.blockIds = null;
  }
}
