// DiT block streaming (ComfyUI's and Wan2GP's block swap) for a model whose blocks run in order: every block's weights
// wait in host memory (read back once, the copy kept: engine/host-held.ts), and each use uploads the block into pool
// buffers of its sizes and gives them back after it. `prefetch` blocks ahead are uploaded before a block's work is
// recorded (WebGPU has one queue, so the uploads are ordered with the work rather than overlapping it: prefetch 1 keeps
// two blocks on the GPU). The outputs are the same: the same bytes, the same kernels. The image DiTs use it
// (krea2/transformer.ts, qwen_image21/transformer.ts; the policy: common/image-residency.ts); MiniMax H3 keeps its own
// copy of the same logic (minimax_h3/transformer/transformer.ts) until its restructuring can take this one.
import type { Engine } from '../../engine/engine';
import { releaseToHost, type HostHeld } from '../../engine/host-held';
import { Tensor } from '../../engine/tensor';

/** Where a DiT's blocks go as they load: the GPU, host memory, or decided from the first block's pool bytes. */
export type BlockPlacement = 'gpu' | 'host' | ((first: { blockBytes: number; blocks: number }) => 'gpu' | 'host');

/** What a streaming DiT reports: its blocks' bytes in host memory, their pool bytes when resident, uploads so far. */
export interface BlockOffloadState {
  blocks: number;
  prefetch: number;
  hostBytes: number;
  gpuBytes: number;
  uploadedBytes: number;
}

/** Pool bytes of the distinct storages of `ts` (size classes). */
export function poolBytesOf(ts: readonly Tensor[]): number {
  return [...new Set(ts.map((t) => t.storage))].reduce((a, s) => a + s.pooled.size, 0);
}

/** The GPU tensors a loader added to `loaded` since index `from` (WeightLoader.loaded also holds host-side entries). */
export function loadedSince(loaded: readonly unknown[], from: number): Tensor[] {
  return loaded.slice(from).filter((t): t is Tensor => t instanceof Tensor);
}

/**
 * One DiT's block stream: each block's GPU tensors, resident or held on the host. Built during the load
 * (BlockStream.loading: each block placed as it loads, so a DiT that streams is never whole on the GPU), moved later
 * by offload() / resident() for a job of another size.
 */
export class BlockStream {
  /** Each block's host copy while streamed (null: resident). */
  private held: HostHeld[] | null = null;
  /** The host copies kept from a resident() call, for an offload() without a readback. */
  private parked: HostHeld[] | null = null;

  private constructor(
    private readonly e: Engine,
    private readonly blockTensors: Tensor[][],
    readonly prefetch: number,
  ) {}

  /**
   * A stream filled while loading: add(ts) after each block loads (its GPU tensors); the first decides the placement
   * (`placement`), and a host placement moves each block to host memory before the next one loads. The loader frees
   * the tensors where the load fails (a host-held storage frees like any other).
   */
  static loading(e: Engine, blocks: number, placement: BlockPlacement = 'gpu', prefetch = 1): { add(ts: Tensor[]): Promise<void>; done(): BlockStream } {
    const tensors: Tensor[][] = [];
    const held: HostHeld[] = [];
    let place = typeof placement === 'string' ? placement : null;
    return {
      async add(ts) {
        tensors.push(ts);
        if (place === null) place = (placement as Exclude<BlockPlacement, string>)({ blockBytes: poolBytesOf(ts), blocks });
        if (place === 'host') held.push(await releaseToHost(e, ts, { keep: true }));
      },
      done() {
        const s = new BlockStream(e, tensors, Math.max(0, Math.floor(prefetch)));
        if (held.length) s.held = held;
        return s;
      },
    };
  }

  /** True while the blocks stream from host memory. */
  get streamed(): boolean {
    return this.held !== null;
  }

  /** Null when resident; else the blocks' host bytes (what one pass over every block uploads), their pool bytes when
   * resident, and the uploads so far. */
  get state(): BlockOffloadState | null {
    const h = this.held;
    if (!h) return null;
    const sum = (f: (x: HostHeld) => number) => h.reduce((a, x) => a + f(x), 0);
    return { blocks: h.length, prefetch: this.prefetch, hostBytes: sum((x) => x.bytes), gpuBytes: sum((x) => x.gpuBytes), uploadedBytes: sum((x) => x.uploadedBytes) };
  }

  /** Pool bytes of every block resident (whether resident now or not). */
  get residentBytes(): number {
    const h = this.held;
    return h ? h.reduce((a, x) => a + x.gpuBytes, 0) : this.blockTensors.reduce((a, ts) => a + poolBytesOf(ts), 0);
  }

  /** Pool bytes the stream holds on the GPU at once while streaming (the largest prefetch + 1 consecutive blocks). */
  get streamingBytes(): number {
    const sizes = this.held ? this.held.map((x) => x.gpuBytes) : this.blockTensors.map((ts) => poolBytesOf(ts));
    let most = 0;
    for (let i = 0; i < sizes.length; i++) most = Math.max(most, sizes.slice(i, i + this.prefetch + 1).reduce((a, b) => a + b, 0));
    return most;
  }

  /** Every block to host memory (read back once; the parked copies from resident() need no readback). */
  async offload(): Promise<void> {
    if (this.held) return;
    if (this.parked) {
      for (const h of this.parked) h.evict();
      this.held = this.parked;
      this.parked = null;
      return;
    }
    const held: HostHeld[] = [];
    try {
      for (const ts of this.blockTensors) held.push(await releaseToHost(this.e, ts, { keep: true }));
    } catch (err) {
      for (const h of held) h.restore();
      throw err;
    }
    this.held = held;
  }

  /** Every block resident again; the host copies are kept for the next offload(). */
  resident(): void {
    const h = this.held;
    if (!h) return;
    for (const x of h) x.restore();
    this.held = null;
    this.parked = h;
  }

  /** Block n's weights on the GPU (and `prefetch` more after it) while `fn` records its work, given back after. */
  with<T>(n: number, fn: () => T): T {
    const h = this.held;
    if (!h) return fn();
    for (let k = n; k <= Math.min(n + this.prefetch, h.length - 1); k++) h[k]!.restore();
    try {
      return fn();
    } finally {
      h[n]!.evict();
    }
  }
}
