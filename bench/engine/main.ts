// npm run bench:engine [-- --sizes large] [--iters N] [--only matmul,attention,conv,interp,linear-decode,dispatch,...]
//                      [--torch cuda|cpu|off]  (the same shapes through PyTorch, side by side; see torch.ts)
//                      [--tuning-out FILE]  (the GEMM winners per shape class as a tuning table: src/engine/tuning.ts)
//                      [--emulate]  (the tensor-core rows through the emulated builtins: rehearses the sweep on lavapipe)
//                      [--sizes tiny]  (one small shape per op: the rehearsal's)
// Per op and size: mean time per call (N calls recorded back to back, one sync), GFLOP/s or GB/s, and the
// fraction of the adapter's roofline (ROOFLINES; unknown adapters print n/a). Wall-clock timing around a sync:
// on lavapipe it includes the ~46 us per-dispatch cost, which is the real cost there.
// Default sizes finish in seconds on lavapipe; `--sizes large` is for a GPU (the issue's goals: f16 GEMM
// 8192^3, attention d=128 at 16k tokens).
import { Engine } from '../../src/engine/engine';
import type { Tensor } from '../../src/engine/tensor';
import { attention } from '../../src/engine/ops/attention';
import { ATTENTION_TILES, attentionSubgroupChoice, type AttentionTile, type AttentionTileName } from '../../src/engine/ops/attention_subgroup';
import { linear } from '../../src/engine/ops/linear';
import { w8a8Plan, W8A8_TILES, type W8A8TileName } from '../../src/engine/ops/matmul_w8a8';
import { matmul } from '../../src/engine/ops/matmul';
import { subgroupMatrixPlan, SUBGROUP_TILES, type SubgroupTileName } from '../../src/engine/ops/matmul_subgroup';
import { add } from '../../src/engine/ops/elementwise';
import { sum } from '../../src/engine/ops/reduce';
import { sample } from '../../src/engine/ops/sampling';
import { softmax } from '../../src/engine/ops/softmax';
import { quantizeInt8PerChannel, uploadInt8 } from '../../src/engine/quantize';
import { convResampleCases } from './conv_resample';
import { decodeCases } from './decode';
import { torchBaseline, type TorchCase } from './torch';
import { writeFileSync } from 'node:fs';
import { shapeClass, tuningFileName, validateTuningTable, type AttentionChoice, type GemmChoice, type MeasuredRates, type ShapeClass, type TuningTable } from '../../src/engine/tuning';

interface Roofline { match: RegExp; label: string; f16Tflops: number; f32Tflops: number; bwGBs: number }
// Datasheet peaks (shared/spec/engine.md). f16 = dense tensor-core peak; f32 = without tensor cores.
const ROOFLINES: Roofline[] = [
  { match: /H200/i, label: 'H200 (datasheet)', f16Tflops: 989, f32Tflops: 67, bwGBs: 4800 },
];

interface Case {
  op: string; size: string; flops?: number; bytes?: number; torch?: TorchCase;
  /** Time the recording only (the calls, not the sync after them). */
  recordOnly?: boolean;
  /** Why this adapter cannot run the case (printed, case skipped); null: it can. */
  unavailable?: (e: Engine) => string | null;
  setup: (e: Engine) => { run: () => void; free: () => void };
  /** An f16 GEMM row the tuning sweep compares: its output size and kernel ('tiled' or a tensor-core variant). */
  gemm?: { M: number; N: number; variant: string };
  /** An f16 attention row at Krea 1K's shape, which the tuning table's attention entry is picked on: 'flash', the
   * file kernel's 'default' tile, or an ATTENTION_TILES name. */
  attn?: { variant: string; D: number };
}

const args = process.argv.slice(2);
const arg = (name: string) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : undefined; };
const large = arg('--sizes') === 'large';
const tiny = arg('--sizes') === 'tiny';
const emulate = args.includes('--emulate');
const tuningOut = arg('--tuning-out');
const only = arg('--only')?.split(',');
const itersArg = Number(arg('--iters') ?? 0);

function rand(n: number): Float32Array {
  const a = new Float32Array(n);
  let s = 12345;
  for (let i = 0; i < n; i++) { s = (Math.imul(s, 1103515245) + 12345) >>> 0; a[i] = (s / 2 ** 32) * 2 - 1; }
  return a;
}

function up(e: Engine, shape: number[], dtype: 'f32' | 'f16'): Tensor {
  return e.upload(rand(shape.reduce((a, b) => a * b, 1)), shape, dtype);
}

function cases(): Case[] {
  const out: Case[] = [];
  const gemm = large ? [[4096, 4096, 4096], [8192, 8192, 8192]] : tiny ? [[64, 64, 64]] : [[256, 256, 256], [512, 512, 512]];
  for (const dtype of ['f32', 'f16'] as const) {
    for (const [M, K, N] of gemm) {
      out.push({ op: `matmul ${dtype}`, size: `${M}x${K}x${N}`, flops: 2 * M! * K! * N!, torch: { fn: 'matmul', dtype, M: M!, K: K!, N: N! },
        gemm: dtype === 'f16' ? { M: M!, N: N!, variant: 'tiled' } : undefined, setup: (e) => {
        const a = up(e, [M!, K!], dtype); const b = up(e, [K!, N!], dtype);
        let c: Tensor | null = null;
        return { run: () => { c?.free(); c = matmul(e, a, b, { path: 'tiled' }); }, free: () => { a.free(); b.free(); c?.free(); } };
      } });
    }
  }
  // the tensor-core path beside the default one, same shapes, each tile (opt-in in the service until these rows win)
  const sgUnavailable = (e: Engine) => { const p = subgroupMatrixPlan(e, { emulate }); return 'reason' in p ? p.reason : null; };
  for (const tile of Object.keys(SUBGROUP_TILES) as SubgroupTileName[]) {
    for (const [M, K, N] of gemm) {
      out.push({ op: `matmul f16 sgmatrix ${tile}`, size: `${M}x${K}x${N}`, flops: 2 * M! * K! * N!, torch: { fn: 'matmul', dtype: 'f16', M: M!, K: K!, N: N! },
        unavailable: sgUnavailable, gemm: { M: M!, N: N!, variant: tile },
        setup: (e) => {
          const a = up(e, [M!, K!], 'f16'); const b = up(e, [K!, N!], 'f16');
          let c: Tensor | null = null;
          return { run: () => { c?.free(); c = matmul(e, a, b, { path: 'subgroup', subgroup: { tile, emulate } }); }, free: () => { a.free(); b.free(); c?.free(); } };
        } });
    }
  }
  // a DiT projection as the models call it: linear(x, W) with W (N, K) read through its transpose view (Krea 2 at 1K:
  // 4096 image + 69 text tokens, width 6144), with an f16 weight and an int8 one (the _int8 profiles; PyTorch's
  // column is its f16 nn.Linear for both)
  const [lt, lk, ln] = large ? [4165, 6144, 6144] : tiny ? [32, 64, 64] : [64, 512, 512];
  let wq: ReturnType<typeof quantizeInt8PerChannel> | null = null;   // quantised once for the int8 rows
  for (const wtype of ['f16', 'int8'] as const) {
    for (const path of ['tiled', ...Object.keys(SUBGROUP_TILES).map((t) => `sgmatrix ${t}`)]) {
      const tile = path.startsWith('sgmatrix') ? (path.split(' ')[1] as SubgroupTileName) : null;
      out.push({ op: `linear ${wtype} ${path}`, size: `${lt}x${lk}x${ln}`, flops: 2 * lt * lk * ln, torch: { fn: 'linear', dtype: 'f16', M: lt, K: lk, N: ln },
        unavailable: tile ? sgUnavailable : undefined,
        gemm: wtype === 'f16' ? { M: lt, N: ln, variant: tile ?? 'tiled' } : undefined,
        setup: (e) => {
          const x = up(e, [lt, lk], 'f16');
          const w = wtype === 'f16' ? up(e, [ln, lk], 'f16') : uploadInt8(e, (wq ??= quantizeInt8PerChannel(rand(ln * lk), ln, lk)), 'f16');
          let y: Tensor | null = null;
          const opts = tile ? { path: 'subgroup' as const, subgroup: { tile, emulate } } : { path: 'tiled' as const };
          const free = () => { x.free(); if ('q' in w) { w.q.free(); w.scales.free(); } else w.free(); y?.free(); };
          return { run: () => { y?.free(); y = linear(e, x, w, null, opts); }, free };
        } });
    }
  }
  // W8A8 (issue 43, opt-in): the same int8 projection with its activations quantised per token on the fly, i8 x i8
  // -> i32 tensor cores (ops/matmul_w8a8.ts; the quantiser's pass included in the time), each W8A8 tile
  const w8Unavailable = (e: Engine) => { const p = w8a8Plan(e, { emulate }); return 'reason' in p ? p.reason : null; };
  for (const tile of Object.keys(W8A8_TILES) as W8A8TileName[]) {
    out.push({ op: `linear int8 w8a8 ${tile}`, size: `${lt}x${lk}x${ln}`, flops: 2 * lt * lk * ln, torch: { fn: 'linear', dtype: 'f16', M: lt, K: lk, N: ln },
      unavailable: w8Unavailable,
      setup: (e) => {
        const x = up(e, [lt, lk], 'f16');
        const w = uploadInt8(e, (wq ??= quantizeInt8PerChannel(rand(ln * lk), ln, lk)), 'f16');
        let y: Tensor | null = null;
        const free = () => { x.free(); w.q.free(); w.scales.free(); y?.free(); };
        return { run: () => { y?.free(); y = linear(e, x, w, null, { path: 'w8a8', w8a8: { tile, emulate } }); }, free };
      } });
  }
  const att = large ? [[1, 24, 4096, 128], [1, 24, 16384, 128]] : tiny ? [[1, 2, 64, 64]] : [[1, 4, 256, 64]];
  for (const dtype of ['f32', 'f16'] as const) {
    for (const [B, H, L, D] of att) {
      out.push({ op: `attention ${dtype}`, size: `B${B} H${H} L${L} D${D}`, flops: 4 * B! * H! * L! * L! * D!, torch: { fn: 'attention', dtype, B: B!, H: H!, L: L!, D: D! }, setup: (e) => {
        const q = up(e, [B!, H!, L!, D!], dtype); const k = up(e, [B!, H!, L!, D!], dtype); const v = up(e, [B!, H!, L!, D!], dtype);
        let o: Tensor | null = null;
        return { run: () => { o?.free(); o = attention(e, q, k, v, { path: 'flash' }); }, free: () => { q.free(); k.free(); v.free(); o?.free(); } };
      } });
    }
  }
  // the tensor-core attention beside the flash kernel (opt-in until these rows win), and both at Krea 2's 1K
  // shape: 48 query heads on 12 kv heads, 4096 image + 69 text tokens (PyTorch's column: no GQA case there).
  // 'sgmatrix' is the file kernel's default tile; 'sgmatrix g...' each generated preset of ATTENTION_TILES (issue 43).
  const krea = large ? { B: 1, H: 48, Hkv: 12, L: 4165, D: 128 } : tiny ? { B: 1, H: 4, Hkv: 2, L: 70, D: 64 } : { B: 1, H: 4, Hkv: 1, L: 130, D: 64 };
  const mha = att.map(([B, H, L, D]) => ({ B: B!, H: H!, Hkv: H!, L: L!, D: D! }));
  const generated = (Object.keys(ATTENTION_TILES) as AttentionTileName[]).filter((n) => (ATTENTION_TILES[n] as AttentionTile).fm);
  // (the generated presets at the first MHA shape and Krea's only: the 16K rows would cost the GPU call's gemm step
  // more than its bound allows)
  const attRows: [string, { B: number; H: number; Hkv: number; L: number; D: number }[]][] = [
    ['flash', [krea]], ['sgmatrix', [...mha, krea]], ...generated.map((n) => [`sgmatrix ${n}`, [mha[0]!, krea]] as [string, typeof mha]),
  ];
  for (const [path, shapes] of attRows) {   // flash MHA: the rows above
    const tile = path.startsWith('sgmatrix ') ? (path.split(' ')[1] as AttentionTileName) : undefined;
    const subgroup = { tile, emulate };
    for (const { B, H, Hkv, L, D } of shapes) {
      out.push({ op: `attention f16 ${path}`, size: `B${B} H${H}${Hkv === H ? '' : `/${Hkv}`} L${L} D${D}`, flops: 4 * B * H * L * L * D,
        torch: Hkv === H ? { fn: 'attention', dtype: 'f16', B, H, L, D } : undefined,
        attn: B === krea.B && H === krea.H && Hkv === krea.Hkv && L === krea.L ? { variant: path === 'flash' ? 'flash' : tile ?? 'default', D } : undefined,
        unavailable: path !== 'flash' ? (e) => { const ch = attentionSubgroupChoice(e, D, subgroup); return 'reason' in ch ? ch.reason : null; } : undefined,
        setup: (e) => {
          const q = up(e, [B, H, L, D], 'f16'); const k = up(e, [B, Hkv, L, D], 'f16'); const v = up(e, [B, Hkv, L, D], 'f16');
          let o: Tensor | null = null;
          const opts = path === 'flash' ? { path: 'flash' as const } : { path: 'subgroup' as const, subgroup };
          return { run: () => { o?.free(); o = attention(e, q, k, v, opts); }, free: () => { q.free(); k.free(); v.free(); o?.free(); } };
        } });
    }
  }
  const [R, C] = large ? [16384, 8192] : [256, 4096];
  out.push({ op: 'softmax f32', size: `${R}x${C}`, bytes: 2 * R * C * 4, torch: { fn: 'softmax', dtype: 'f32', R, C }, setup: (e) => {
    const x = up(e, [R, C], 'f32'); let y: Tensor | null = null;
    return { run: () => { y?.free(); y = softmax(e, x); }, free: () => { x.free(); y?.free(); } };
  } });
  out.push({ op: 'sum f32', size: `${R}x${C}`, bytes: R * C * 4, torch: { fn: 'sum', dtype: 'f32', R, C }, setup: (e) => {
    const x = up(e, [R, C], 'f32'); let y: Tensor | null = null;
    return { run: () => { y?.free(); y = sum(e, x); }, free: () => { x.free(); y?.free(); } };
  } });
  const [SB, V] = large ? [64, 152064] : [4, 32000];
  out.push({ op: 'sample top-50 f32', size: `${SB}x${V}`, bytes: 3 * SB * V * 4, setup: (e) => {
    const x = up(e, [SB, V], 'f32'); let y: Tensor | null = null; let step = 0;
    return { run: () => { y?.free(); y = sample(e, x, { topK: 50, temperature: 0.8, seed: 1, step: step++ }); }, free: () => { x.free(); y?.free(); } };
  } });
  // what one dispatch costs when its work is nothing, a decode loop paying it hundreds of times a token: the CPU's
  // recording alone (op checks, params, bind group, pass commands), then to the GPU's end. The adds ping-pong
  // between two tensors, as a step's dispatches reuse the same pool buffers.
  for (const recordOnly of [true, false]) {
    out.push({ op: `dispatch ${recordOnly ? 'recorded' : 'done'}`, size: '16-element add', recordOnly, setup: (e) => {
      const x = up(e, [16], 'f32'); const y = up(e, [16], 'f32'); let i = 0;
      return { run: () => { if (i++ % 2) add(e, y, 1, x); else add(e, x, 1, y); }, free: () => { x.free(); y.free(); } };
    } });
  }
  out.push(...convResampleCases(large, up));
  out.push(...decodeCases(rand, up));
  return out.filter((c) => !only || only.some((o) => c.op.startsWith(o)));
}

async function main(): Promise<void> {
  const e = await Engine.create({ allowSoftware: true });
  const d = e.describe();
  const roof = ROOFLINES.find((r) => r.match.test(d.name));
  console.log(`adapter: ${d.name} (${d.vendor}/${d.architecture}, ${d.backend}${d.software ? ', software' : ''}); Dawn toggles: ${d.toggles.join(', ') || 'none'}`);
  console.log(`roofline: ${roof ? `${roof.label}: f16 ${roof.f16Tflops} TFLOP/s, f32 ${roof.f32Tflops} TFLOP/s, ${roof.bwGBs} GB/s` : 'unknown for this adapter (a CPU rasteriser: no stated peak), fractions n/a'}`);
  console.log(`date: ${new Date().toISOString()}  sizes: ${large ? 'large' : tiny ? 'tiny' : 'default'}`);
  console.log(['op'.padEnd(22), 'size'.padEnd(22), 'ms/call'.padStart(10), 'rate'.padStart(16), 'roofline'.padStart(9)].join(' '));
  const measured: { c: Case; ms: number }[] = [];
  const failed: string[] = [];
  for (const c of cases()) {
    const why = c.unavailable?.(e);
    if (why) {
      console.log([c.op.padEnd(22), c.size.padEnd(22)].join(' ') + `  skipped: ${why}`);
      continue;
    }
    let s: ReturnType<Case['setup']> | null = null;
    let iters = itersArg || 1;
    let ms = 0;
    try {
      s = c.setup(e);
      s.run(); // compile + warm up
      await e.sync();
      for (;;) {
        const t0 = performance.now();
        for (let i = 0; i < iters; i++) s.run();
        const recorded = performance.now();
        await e.sync();
        ms = ((c.recordOnly ? recorded : performance.now()) - t0) / iters;
        if (itersArg || ms * iters > 300 || iters >= 1000) break;
        iters = Math.min(1000, Math.ceil((400 / Math.max(ms, 0.01))));
      }
    } catch (err) {
      // one case's failure (a kernel the driver refuses, say) must not cost a GPU run the rows after it
      console.log([c.op.padEnd(22), c.size.padEnd(22)].join(' ') + `  FAILED: ${(err as Error).message.split('\n')[0]}`);
      failed.push(c.op);
      await e.sync().catch(() => undefined);
      s?.free();
      continue;
    }
    const sec = ms / 1000;
    let rate = '';
    let frac = 'n/a';
    if (c.flops) {
      const g = c.flops / sec / 1e9;
      rate = `${g.toFixed(g < 10 ? 2 : 0)} GFLOP/s`;
      const peak = roof && (c.op.includes('f32') ? roof.f32Tflops : roof.f16Tflops);
      if (peak) frac = `${((100 * g) / (peak * 1000)).toFixed(1)}%`;
    } else if (c.bytes) {
      const g = c.bytes / sec / 1e9;
      rate = `${g.toFixed(g < 10 ? 2 : 0)} GB/s`;
      if (roof) frac = `${((100 * g) / roof.bwGBs).toFixed(1)}%`;
    }
    console.log([c.op.padEnd(22), c.size.padEnd(22), ms.toFixed(3).padStart(10), rate.padStart(16), frac.padStart(9)].join(' ') + `  (${iters} calls)`);
    s.free();
    measured.push({ c, ms });
  }
  if (tuningOut) writeTuning(e, measured, tuningOut);
  await e.shutdown();
  printTorchColumn(measured);
  if (failed.length > 0) {
    console.log(`\n${failed.length} case(s) FAILED: ${failed.join(', ')}`);
    process.exitCode = 1;
  }
}

/**
 * The sweep's winners as a tuning table (src/engine/tuning.ts) at `file`: per shape class, of the kernels that ran
 * every f16 GEMM shape of that class measured here (a failed or skipped variant is left out, not the class), the
 * one with the least total time. Committed by copying the file to tuning/<its name, printed>.
 */
function writeTuning(e: Engine, measured: { c: Case; ms: number }[], file: string): void {
  const byClass = new Map<ShapeClass, { shapes: Set<string>; times: Map<string, Map<string, number>> }>();
  const flopsOf = new Map<string, number>();
  for (const { c, ms } of measured) {
    if (!c.gemm) continue;
    const cls = shapeClass(c.gemm.M, c.gemm.N);
    const entry = byClass.get(cls) ?? { shapes: new Set<string>(), times: new Map<string, Map<string, number>>() };
    byClass.set(cls, entry);
    const shape = `${c.op.split(' ')[0]} ${c.size}`;
    entry.shapes.add(shape);
    flopsOf.set(shape, c.flops ?? 0);
    const t = entry.times.get(c.gemm.variant) ?? new Map<string, number>();
    entry.times.set(c.gemm.variant, t.set(shape, ms));
  }
  const gemm: Partial<Record<ShapeClass, GemmChoice>> = {};
  const rates: MeasuredRates = { gemm: {} };   // what the winners ran at, for npm run plan's step times (src/plan/step-time.ts)
  const sweep: string[] = [];
  for (const [cls, { shapes, times }] of byClass) {
    const totals = [...times].filter(([, t]) => t.size === shapes.size).map(([v, t]) => [v, [...t.values()].reduce((x, y) => x + y, 0)] as const);
    totals.sort((x, y) => x[1] - y[1]);
    const win = totals[0];
    if (!win) continue;
    gemm[cls] = win[0] === 'tiled' ? { path: 'tiled' } : { path: 'subgroup', variant: win[0] };
    rates.gemm![cls] = [...shapes].reduce((a, sh) => a + flopsOf.get(sh)!, 0) / (win[1] * 1e-3) / 1e12;
    sweep.push(`${cls} (${[...shapes].join(', ')}): ${totals.map(([v, ms]) => `${v} ${ms.toFixed(3)} ms`).join(', ')}`);
  }
  // attention: the fastest kernel at Krea 1K's shape (the file kernel's 'default' row named by the tile it took)
  let attention: AttentionChoice | undefined;
  const att = measured.filter((m) => m.c.attn).map(({ c, ms }) => {
    let v = c.attn!.variant;
    if (v === 'default') {
      const ch = attentionSubgroupChoice(e, c.attn!.D, { emulate });
      v = 'tile' in ch ? Object.entries(ATTENTION_TILES).find(([, t]) => t === ch.tile)?.[0] ?? 'unknown' : 'unknown';
    }
    return [v, ms, c.flops ?? 0] as const;
  }).filter(([v]) => v !== 'unknown').sort((x, y) => x[1] - y[1]);
  if (att.length > 0) {
    attention = att[0]![0] === 'flash' ? { path: 'flash' } : { path: 'subgroup', variant: att[0]![0] };
    rates.attention = att[0]![2] / (att[0]![1] * 1e-3) / 1e12;
    sweep.push(`attention (${measured.find((m) => m.c.attn)!.c.size}): ${att.map(([v, ms]) => `${v} ${ms.toFixed(3)} ms`).join(', ')}`);
  }
  // the memory-bound rows (softmax, sum: bytes they must move) and one empty dispatch to the GPU's end
  const mem = measured.filter((m) => m.c.bytes && /^(softmax|sum) /.test(m.c.op));
  if (mem.length > 0) rates.memory_gbs = mem.reduce((a, m) => a + m.c.bytes!, 0) / (mem.reduce((a, m) => a + m.ms, 0) * 1e-3) / 1e9;
  const empty = measured.find((m) => m.c.op === 'dispatch done');
  if (empty) rates.dispatch_us = empty.ms * 1e3;
  if (Object.keys(rates.gemm!).length === 0) delete rates.gemm;
  sweep.push(`rates: ${JSON.stringify(rates)}`);
  const info = e.gpu.adapter.info;
  const table: TuningTable & { sweep: string[] } = {
    version: 1,
    adapter: { vendor: info.vendor, architecture: info.architecture, device: info.device, driver: info.description },
    measured: `${new Date().toISOString()} by bench/engine/main.ts ${args.join(' ')}`,
    gemm,
    ...(attention ? { attention } : {}),
    ...(Object.keys(rates).length > 0 ? { rates } : {}),
    sweep,
  };
  validateTuningTable(table, Object.keys(SUBGROUP_TILES), Object.keys(ATTENTION_TILES));
  writeFileSync(file, `${JSON.stringify(table, null, 2)}\n`);
  console.log(`\ntuning table (${Object.entries(gemm).map(([k, v]) => `${k}: ${v.path}${v.variant ? ` ${v.variant}` : ''}`).join(', ') || 'no GEMM measured'}; attention: ${attention ? `${attention.path}${attention.variant ? ` ${attention.variant}` : ''}` : 'not measured'}) written to ${file}; commit it as tuning/${tuningFileName(table.adapter)}`);
  for (const line of sweep) console.log(`  ${line}`);
}

/** The same shapes through PyTorch, in this call; ratio = PyTorch time / ours (above 1: we are faster). */
function printTorchColumn(measured: { c: Case; ms: number }[]): void {
  const withTorch = measured.filter((m) => m.c.torch).map((m, i) => ({ ...m, id: String(i) }));
  const t = torchBaseline(withTorch.map((m) => ({ id: m.id, spec: m.c.torch! })), arg('--torch') ?? 'cuda', itersArg);
  if ('skipped' in t) {
    console.log(`\nPyTorch side by side: skipped (${t.skipped})`);
    return;
  }
  console.log(`\nPyTorch ${t.torch} on ${t.device}, same shapes (its nn.Linear f16 for the int8 row):`);
  console.log(['op'.padEnd(22), 'size'.padEnd(22), 'ours ms'.padStart(10), 'torch ms'.padStart(10), 'torch/ours'.padStart(11)].join(' '));
  for (const m of withTorch) {
    const tm = t.ms[m.id];
    console.log([m.c.op.padEnd(22), m.c.size.padEnd(22), m.ms.toFixed(3).padStart(10), tm.toFixed(3).padStart(10), (tm / m.ms).toFixed(2).padStart(11)].join(' '));
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
