// npm run bench:load -- [--gib 2] [--dir <folder>] [--tensor-mib 32] [--chunk-mib 8] [--convert-on gpu,cpu] [--keep] [--skip-int8]
// Kiln's checkpoint load rate beside the raw read rate of the same file (issue 44, "load at disk speed"): a synthetic
// BF16 checkpoint of --gib GiB (linears [rows, 4096] of --tensor-mib MiB each, real bytes on disk, in a temp folder
// under --dir) is
//   read raw            sequential 8 MiB reads into one buffer (what the loader's chunks are), nothing else
//   loaded plain        loadTensor as f16 (BF16 -> f16 conversion, the engine's upload, its queue drained), once per
//                       --convert-on: 'gpu' (the raw chunk uploaded, the convert kernel: what 'auto' takes for these
//                       tensors) and 'cpu' (the JS table before the upload, the path before the kernel)
//   loaded int8         quantizeInt8FromCheckpoint + uploadInt8: first load (quantised on the CPU, written to the
//                       int8 cache), then from the cache (engine/int8-cache.ts), whose files are also read raw
// each with the page cache warm, and cold where it can be dropped: posix_fadvise(DONTNEED) through GNU dd's
// `iflag=nocache count=0` (no root needed), checked with util-linux fincore; the report says how much stayed
// resident. Each tensor is freed after its upload (the GPU pool reuses its buffer), so memory stays one tensor wide.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine } from '../../src/engine/engine';
import { int8CacheDir, int8CacheStats, resetInt8CacheStats, useInt8Cache } from '../../src/engine/int8-cache';
import { loadTensor } from '../../src/engine/load';
import { loadThreads, quantizeInt8FromCheckpoint } from '../../src/engine/quantize-parallel';
import { uploadInt8 } from '../../src/engine/quantize';
import { Checkpoint } from '../../src/engine/safetensors';

interface Args {
  gib: number;
  dir: string;
  tensorMib: number;
  chunkMib: number;
  convertOn: ('gpu' | 'cpu')[];
  keep: boolean;
  int8: boolean;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { gib: 2, dir: tmpdir(), tensorMib: 32, chunkMib: 8, convertOn: ['gpu', 'cpu'], keep: false, int8: true };
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i]!;
    const num = (name: string) => {
      const n = Number(argv[++i]);
      if (!(n > 0)) throw new Error(`${name} needs a positive number`);
      return n;
    };
    if (v === '--gib') a.gib = num(v);
    else if (v === '--dir') a.dir = argv[++i]!;
    else if (v === '--tensor-mib') a.tensorMib = num(v);
    else if (v === '--chunk-mib') a.chunkMib = num(v);
    else if (v === '--convert-on') {
      const on = (argv[++i] ?? '').split(',');
      if (!on.length || !on.every((o) => o === 'gpu' || o === 'cpu')) throw new Error('--convert-on takes gpu, cpu or gpu,cpu');
      a.convertOn = on as ('gpu' | 'cpu')[];
    }
    else if (v === '--keep') a.keep = true;
    else if (v === '--skip-int8') a.int8 = false;
    else throw new Error(`unknown option ${v} (--gib N, --dir D, --tensor-mib M, --chunk-mib C, --convert-on gpu,cpu, --keep, --skip-int8)`);
  }
  return a;
}

const K = 4096;
const MiB = 2 ** 20;

/** Writes the checkpoint with real bytes (no holes: a sparse file would read faster than a disk). BF16 values from a
 * cheap LCG, every row with its own spread, so quantisation does real work. */
async function writeSynthetic(path: string, tensors: number, rows: number): Promise<string[]> {
  const names = Array.from({ length: tensors }, (_, i) => `blocks.${i}.weight`);
  const each = rows * K * 2;
  const header: Record<string, unknown> = {};
  names.forEach((n, i) => (header[n] = { dtype: 'BF16', shape: [rows, K], data_offsets: [i * each, (i + 1) * each] }));
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  const h = await open(path, 'w');
  try {
    let pos = 0;
    const head = Buffer.concat([len, Buffer.from(json)]);
    await h.write(head, 0, head.length, pos);
    pos += head.length;
    const piece = new Uint16Array(Math.min(each, 16 * MiB) / 2);
    let s = 12345;
    for (let t = 0; t < tensors; t++) {
      for (let off = 0; off < each; off += piece.byteLength) {
        for (let i = 0; i < piece.length; i++) {
          s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
          // bf16 of a value in about [-2, 2): sign, exponent 120..127, 7 mantissa bits
          piece[i] = ((s >>> 31) << 15) | ((120 + ((s >>> 20) & 7)) << 7) | ((s >>> 8) & 0x7f);
        }
        await h.write(new Uint8Array(piece.buffer), 0, Math.min(piece.byteLength, each - off), pos);
        pos += Math.min(piece.byteLength, each - off);
      }
    }
    await h.sync();
  } finally {
    await h.close();
  }
  return names;
}

/** Drops `files` from the page cache (posix_fadvise DONTNEED via dd); returns the fraction still resident, or null
 * when it cannot be told (no fincore). */
function dropCache(files: string[]): number | null {
  for (const f of files) spawnSync('dd', [`if=${f}`, 'iflag=nocache', 'count=0', 'status=none']);
  let resident = 0;
  let total = 0;
  for (const f of files) {
    const r = spawnSync('fincore', ['--bytes', '--noheadings', '--output', 'RES', f], { encoding: 'utf8' });
    if (r.status !== 0) return null;
    resident += Number(r.stdout.trim());
    total += statSync(f).size;
  }
  return total ? resident / total : 0;
}

async function rawRead(files: string[]): Promise<{ s: number; bytes: number }> {
  const buf = Buffer.allocUnsafe(8 * MiB);
  let bytes = 0;
  const t0 = performance.now();
  for (const f of files) {
    const h = await open(f, 'r');
    try {
      for (;;) {
        const { bytesRead } = await h.read(buf, 0, buf.length, null);
        if (bytesRead === 0) break;
        bytes += bytesRead;
      }
    } finally {
      await h.close();
    }
  }
  return { s: (performance.now() - t0) / 1000, bytes };
}

async function loadPlain(e: Engine, path: string, names: string[], convertOn: 'gpu' | 'cpu', chunkBytes: number): Promise<number> {
  const t0 = performance.now();
  const ckpt = await Checkpoint.open(path);
  try {
    for (const n of names) (await loadTensor(e, ckpt, n, { dtype: 'f16', convertOn, chunkBytes })).free();
    await e.sync();
  } finally {
    await ckpt.close();
  }
  return (performance.now() - t0) / 1000;
}

async function loadInt8(e: Engine, path: string, names: string[], rows: number): Promise<number> {
  const t0 = performance.now();
  const ckpt = await Checkpoint.open(path);
  try {
    for (const n of names) {
      const w = uploadInt8(e, await quantizeInt8FromCheckpoint(ckpt, n, rows, K), 'f16', n);
      w.q.free();
      w.scales.free();
    }
    await e.sync();
  } finally {
    await ckpt.close();
  }
  return (performance.now() - t0) / 1000;
}

function cacheFiles(): string[] {
  const dir = int8CacheDir()!;
  const r = spawnSync('sh', ['-c', `ls "${dir}"/*.safetensors`], { encoding: 'utf8' });
  return r.stdout.trim().split('\n').filter(Boolean);
}

async function main(): Promise<void> {
  const a = parseArgs(process.argv.slice(2));
  const rows = Math.max(1, Math.round((a.tensorMib * MiB) / (K * 2)));
  const tensors = Math.max(1, Math.round((a.gib * 1024) / ((rows * K * 2) / MiB)));
  const work = mkdtempSync(join(a.dir, 'kiln-bench-load-'));
  const path = join(work, 'synthetic.safetensors');
  const lines: string[] = [];
  const say = (s: string) => {
    lines.push(s);
    console.log(s);
  };
  try {
    const tw = performance.now();
    const names = await writeSynthetic(path, tensors, rows);
    const size = statSync(path).size;
    const gb = size / 1e9;
    say(`checkpoint: ${tensors} BF16 tensors [${rows}, ${K}], ${(size / 2 ** 30).toFixed(2)} GiB, written in ${((performance.now() - tw) / 1000).toFixed(1)} s (${work})`);
    say(`machine: ${cpus().length} CPUs (${cpus()[0]?.model.trim()}), load threads ${loadThreads()}, load average ${spawnSync('cat', ['/proc/loadavg'], { encoding: 'utf8' }).stdout.split(' ').slice(0, 3).join(' ')}`);
    const e = await Engine.create({ allowSoftware: true });
    say(`adapter: ${e.describe().name}`);
    const rate = (bytes: number, s: number) => `${(bytes / 1e9 / s).toFixed(2)} GB/s (${s.toFixed(2)} s)`;
    const residentNote = (r: number | null) => (r === null ? 'page cache: could not check (no fincore)' : `after dropping, ${(r * 100).toFixed(1)} % stayed resident`);

    // warm-up: kernels and the pool's buffers exist before anything is timed; the file is in the page cache
    await rawRead([path]);
    const chunkBytes = a.chunkMib * MiB;
    for (const on of a.convertOn) await loadPlain(e, path, names.slice(0, 2), on, chunkBytes);
    const results: Record<string, number> = {};
    for (const temp of ['cold', 'warm'] as const) {
      let note = 'warm: the file was just read';
      if (temp === 'cold') note = residentNote(dropCache([path]));
      const raw = await rawRead([path]);
      if (temp === 'cold') dropCache([path]);
      const parts = [`raw read ${rate(size, raw.s)}`];
      results[`raw_${temp}`] = gb / raw.s;
      for (const [k, on] of a.convertOn.entries()) {
        if (temp === 'cold' && k > 0) dropCache([path]);
        const plain = await loadPlain(e, path, names, on, chunkBytes);
        results[`plain_${on}_${temp}`] = gb / plain;
        parts.push(`Kiln plain load (BF16 -> f16 on the ${on.toUpperCase()}, uploaded) ${rate(size, plain)}: ${((raw.s / plain) * 100).toFixed(0)} % of raw`);
      }
      say(`${temp} (${note}): ${parts.join('; ')}`);
    }

    if (a.int8) {
      useInt8Cache(join(work, 'cache'));
      resetInt8CacheStats();
      const first = await loadInt8(e, path, names, rows);
      const st = int8CacheStats();
      const files = cacheFiles();
      const cacheBytes = files.reduce((n, f) => n + statSync(f).size, 0);
      say(`int8 first load (quantised on ${loadThreads()} threads, ${st.written} entries written, ${(cacheBytes / 2 ** 30).toFixed(2)} GiB): ${first.toFixed(2)} s, ${(gb / first).toFixed(2)} GB/s of checkpoint`);
      results.int8_first_s = first;
      for (const temp of ['cold', 'warm'] as const) {
        let note = 'warm';
        if (temp === 'cold') note = residentNote(dropCache(files));
        const raw = await rawRead(files);
        if (temp === 'cold') dropCache(files);
        resetInt8CacheStats();
        const cached = await loadInt8(e, path, names, rows);
        const hits = int8CacheStats().hits;
        if (hits !== names.length) throw new Error(`cached load: ${hits} hits for ${names.length} tensors`);
        results[`int8_cached_${temp}_s`] = cached;
        say(`int8 cached load, ${temp} (${note}): ${cached.toFixed(2)} s (${(first / cached).toFixed(1)}x faster than the first); cache files read raw ${rate(cacheBytes, raw.s)}, loaded ${rate(cacheBytes, cached)}: ${((raw.s / cached) * 100).toFixed(0)} % of raw`);
      }
      useInt8Cache(undefined);
    }
    await e.shutdown();
    console.log(JSON.stringify({ bench: 'load', gib: a.gib, ...Object.fromEntries(Object.entries(results).map(([k, v]) => [k, Number(v.toFixed(3))])) }));
  } finally {
    if (!a.keep) rmSync(work, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
