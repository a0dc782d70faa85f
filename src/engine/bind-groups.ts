// Bind groups kept across dispatches. Creating one costs Dawn (npm webgpu) about 29 us here (lavapipe, measured
// 2026-12-02: 4,000 createBindGroup calls), most of a small dispatch's recording cost, while a sampling or
// decoding loop binds the same kernels to the same pool buffers step after step (the pool hands sizes back in the
// same order). A group is found again by its kernel, its buffers and its params slot: the recorder gives each key
// a preferred slot of the params ring (slotFor), so a repeated dispatch lands on the same slot, hence the same
// group, whatever else its batch holds.
//
// Keys hold object ids, not the objects: a buffer the pool destroys (trim) is never bound again, so its groups are
// only memory, dropped by clear() (the engine calls it on a trim) or by the size cap (oldest first).
import { Tensor } from './tensor';

export type Binding = Tensor | GPUBufferBinding;

const ids = new WeakMap<object, number>();
let nextId = 1;

function idOf(o: object): number {
  let id = ids.get(o);
  if (id === undefined) ids.set(o, (id = nextId++));
  return id;
}

export class BindGroupCache {
  private readonly groups = new Map<string, GPUBindGroup>();
  /** Lookups answered from the cache and groups created (tests and benches read them). */
  hits = 0;
  misses = 0;

  constructor(readonly maxGroups = 8192) {}

  /** The key of a kernel bound to these tensors (each bound whole), or null if one is a raw buffer binding. */
  static key(kernel: object, bindings: readonly Binding[]): string | null {
    let key = String(idOf(kernel));
    for (const b of bindings) {
      if (!(b instanceof Tensor)) return null;
      key += `,${idOf(b.storage.buffer)}`;
    }
    return key;
  }

  get size(): number {
    return this.groups.size;
  }

  /** The group stored under key@slot, or the one `make` creates (then stored, evicting the oldest past the cap). */
  get(key: string, slot: number, make: () => GPUBindGroup): GPUBindGroup {
    const full = `${key}@${slot}`;
    const hit = this.groups.get(full);
    if (hit) {
      this.hits++;
      return hit;
    }
    this.misses++;
    const group = make();
    this.groups.set(full, group);
    if (this.groups.size > this.maxGroups) this.groups.delete(this.groups.keys().next().value!);
    return group;
  }

  clear(): void {
    this.groups.clear();
  }
}

/** A key's preferred slot among `slots` (FNV-1a of the key): stable from step to step. */
export function slotFor(key: string, slots: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return (h >>> 0) % slots;
}
