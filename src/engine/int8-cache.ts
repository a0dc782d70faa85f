// Kiln's own cache of load-time int8 quantisations (quantize-parallel.ts): the int8 profiles quantise every linear
// weight of a bf16 checkpoint on the CPU at load, minutes for the MiniMax H3 DiT; with the cache on, the first load
// writes each tensor's (q, scales) here and every later load reads them back at disk speed.
//
// One file per quantised tensor, <dir>/int8/<hash of where>.safetensors, holding
//   q       I8  (N, K)   exactly the bytes quantizeInt8PerChannel gives
//   scales  F32 (N)
//   __metadata__: kiln_int8_what (the source's identity, see below), kiln_int8_sha256 (of q's then scales' bytes)
// "where" names the tensor's place (the source file's real path and the tensor's name, or a view's recipe): the same
// place always maps to the same cache file, so a source that changed replaces its entry instead of adding one.
// "what" names its content: the source file's size and mtime (or, for a Hugging Face cache link, the blob's content
// hash), the tensor's dtype, shape and offsets, any transform a view applies, and QUANTIZER_VERSION. An entry whose
// "what" differs is stale: ignored, and overwritten by the fresh quantisation. An entry that does not parse, has the
// wrong shapes or fails its sha256 is corrupt: deleted, never returned. Writes go to a temporary file in the same
// folder, fsync'ed, then renamed over the entry, so a reader sees a whole entry or none.
//
// Where: useInt8Cache(dir) (the worker passes its KILN_CACHE_DIR setting, src/config/settings.ts: default
// XDG_CACHE_HOME/kiln, so a worker on another host caches too), else KILN_CACHE_DIR from the environment
// (engine/settings.ts); neither: no cache (tests and benches opt in).
// A source without an identity (the demos' SyntheticCheckpoint, a view's recipe that gives none) is never cached.
import { createHash } from 'node:crypto';
import { mkdir, open as openFile, rename, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { QUANTIZER_VERSION, type QuantizedInt8 } from './quantize';
import { SafetensorsFile, type ChunkSource } from './safetensors';
import { engineSettings } from './settings';
import type { SourceIdentity } from './source-identity';

/** Subfolder of the cache root holding the entries (KILN_CACHE_DIR/int8). */
export const INT8_CACHE_SUBDIR = 'int8';
const META_WHAT = 'kiln_int8_what';
const META_SHA = 'kiln_int8_sha256';
const READ_CHUNK = 16 << 20;

/** Counts since the process started (or resetInt8CacheStats), for tests, benches and logs. */
export interface Int8CacheStats {
  hits: number;
  /** No entry, or a stale one. */
  misses: number;
  stale: number;
  /** Entries deleted as unreadable or failing their checksum. */
  corrupt: number;
  written: number;
  /** Writes that failed (the load went on without caching). */
  writeErrors: number;
}

const stats: Int8CacheStats = { hits: 0, misses: 0, stale: 0, corrupt: 0, written: 0, writeErrors: 0 };

export function int8CacheStats(): Int8CacheStats {
  return { ...stats };
}

export function resetInt8CacheStats(): void {
  for (const k of Object.keys(stats) as (keyof Int8CacheStats)[]) stats[k] = 0;
}

let configured: { dir: string | null } | null = null;

/** Sets the cache root (entries go to <dir>/int8), or null for none; undefined: back to KILN_CACHE_DIR. */
export function useInt8Cache(dir: string | null | undefined): void {
  configured = dir === undefined ? null : { dir };
}

/** The cache's entry folder now, or null when the cache is off. */
export function int8CacheDir(): string | null {
  const root = configured ? configured.dir : engineSettings().cacheDir ?? null;
  return root ? join(root, INT8_CACHE_SUBDIR) : null;
}

/** The identity the quantised tensor `name` of `src` is cached under, or null: not cacheable. */
export async function int8CacheKey(src: ChunkSource, name: string, N: number, K: number): Promise<SourceIdentity | null> {
  const id = await src.sourceIdentity?.(name);
  if (!id) return null;
  return { where: id.where, what: `int8 v${QUANTIZER_VERSION} (${N}, ${K}) ${id.what}` };
}

function entryPath(dir: string, key: SourceIdentity): string {
  return join(dir, `${createHash('sha256').update(key.where).digest('hex').slice(0, 40)}.safetensors`);
}

/** The cached quantisation of `key`, or null (none, stale, or corrupt: a corrupt file is deleted). */
export async function readInt8Entry(dir: string, key: SourceIdentity, N: number, K: number): Promise<QuantizedInt8 | null> {
  const path = entryPath(dir, key);
  try {
    await stat(path);
  } catch {
    stats.misses++; // no entry (or no folder)
    return null;
  }
  let f: SafetensorsFile;
  try {
    f = await SafetensorsFile.open(path);
  } catch {
    return discard(path);
  }
  try {
    const q = f.entries.get('q');
    const s = f.entries.get('scales');
    const ok = q && s && q.dtype === 'I8' && s.dtype === 'F32' && q.shape.length === 2 && s.shape.length === 1 && q.shape[1] === K && s.shape[0] === q.shape[0];
    if (!ok) return discard(path);
    if (f.metadata[META_WHAT] !== key.what || q.shape[0] !== N) {
      stats.stale++;
      stats.misses++;
      return null;
    }
    const out: QuantizedInt8 = { q: new Int8Array(N * K), scales: new Float32Array(N), N, K };
    const hash = createHash('sha256');
    // straight into the result's memory; the next piece is read while this one is hashed
    const into = async (dst: Uint8Array, start: number) => {
      const read = async (off: number) => {
        const len = Math.min(READ_CHUNK, dst.byteLength - off);
        const { bytesRead } = await f.handle.read(dst, off, len, start + off);
        if (bytesRead !== len) throw new Error('short read');
      };
      let next = dst.byteLength > 0 ? read(0) : null;
      for (let off = 0; off < dst.byteLength; off += READ_CHUNK) {
        await next;
        next = off + READ_CHUNK < dst.byteLength ? read(off + READ_CHUNK) : null;
        next?.catch(() => undefined); // awaited next turn; a failure then is the one reported
        hash.update(dst.subarray(off, Math.min(off + READ_CHUNK, dst.byteLength)));
      }
    };
    await into(new Uint8Array(out.q.buffer), q.start);
    await into(new Uint8Array(out.scales.buffer), s.start);
    if (hash.digest('hex') !== f.metadata[META_SHA]) return discard(path);
    stats.hits++;
    return out;
  } catch {
    return discard(path);
  } finally {
    await f.close().catch(() => undefined);
  }
}

async function discard(path: string): Promise<null> {
  stats.corrupt++;
  stats.misses++;
  await unlink(path).catch(() => undefined);
  return null;
}

/** Writes `q` as the entry of `key`: a temporary file, fsync'ed, renamed over the entry. */
export async function writeInt8Entry(dir: string, key: SourceIdentity, q: QuantizedInt8): Promise<void> {
  await mkdir(dir, { recursive: true });
  const path = entryPath(dir, key);
  const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  const qBytes = new Uint8Array(q.q.buffer, q.q.byteOffset, q.q.byteLength);
  const sBytes = new Uint8Array(q.scales.buffer, q.scales.byteOffset, q.scales.byteLength);
  const sha = createHash('sha256').update(qBytes).update(sBytes).digest('hex');
  const header: Record<string, unknown> = {
    __metadata__: { [META_WHAT]: key.what, [META_SHA]: sha, kiln_int8_where: key.where },
    q: { dtype: 'I8', shape: [q.N, q.K], data_offsets: [0, qBytes.byteLength] },
    scales: { dtype: 'F32', shape: [q.N], data_offsets: [qBytes.byteLength, qBytes.byteLength + sBytes.byteLength] },
  };
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  const head = Buffer.concat([len, Buffer.from(json)]);
  const h = await openFile(tmp, 'w');
  try {
    try {
      await h.write(head, 0, head.byteLength, 0);
      for (let off = 0; off < qBytes.byteLength; off += READ_CHUNK) {
        await h.write(qBytes, off, Math.min(READ_CHUNK, qBytes.byteLength - off), head.byteLength + off);
      }
      await h.write(sBytes, 0, sBytes.byteLength, head.byteLength + qBytes.byteLength);
      await h.sync();
    } finally {
      await h.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  stats.written++;
}

let warned = false;

/**
 * `quantize()`'s result for tensor `name` of `src`, read from the cache when it holds a current entry; otherwise
 * quantised and written to it. Cache faults never fail a load: a bad entry is re-made, a failed write is warned once.
 */
export async function cachedInt8(src: ChunkSource, name: string, N: number, K: number, quantize: () => Promise<QuantizedInt8>): Promise<QuantizedInt8> {
  const dir = int8CacheDir();
  const key = dir ? await int8CacheKey(src, name, N, K).catch(() => null) : null;
  if (!dir || !key) return quantize();
  const hit = await readInt8Entry(dir, key, N, K);
  if (hit) return hit;
  const q = await quantize();
  try {
    await writeInt8Entry(dir, key, q);
  } catch (err) {
    stats.writeErrors++;
    if (!warned) {
      warned = true;
      process.emitWarning(`int8 cache: cannot write under ${dir} (${(err as Error).message}); loads go on quantising at every load`, 'KilnInt8Cache');
    }
  }
  return q;
}
