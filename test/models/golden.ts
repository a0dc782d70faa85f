// The golden-vector harness every model test uses (fixture format: shared/spec/models.md "Golden vectors").
//   test/fixtures/golden/<model>/<component>/<case>.safetensors
//     weight.<checkpoint key>  parameters, input.<name>  inputs (integers stored as F32), output.<name>  results
//     __metadata__: config (upstream config JSON), upstream (repository + version), seed, tolerance ({dtype: {atol, rtol}}),
//       f16_error ({output name: {max, rms, peak}}: upstream's own float16 run against its float32 output),
//       f32_error (the same for upstream's float32 output against its float64 run)
// goldenTests(model, component, body) registers one node:test per case file, so a new case needs no code.
// Tolerances (docs/models/README.md, "Golden tolerances"): int8 at the fixture's stated {atol, rtol}; f32 at the
// stated {atol, rtol} or, where float32 rounding alone moves upstream's own output further (deep conv stacks), a
// multiple of that (F32_RULE); f16 by the float16 rule (F16_RULE), a multiple of the error upstream's own model
// makes in float16 on that case.
// Every comparison first refuses, naming the tensor, a result whose length (or, when the result carries one, shape)
// is not the reference's, and a reference whose data does not fill its shape (expectShape): a check over a prefix
// would pass on the rows it skips.
// GOLDEN_MARGINS=<file> appends one JSON line per comparison (case, tensor, used fraction of the allowance).
// A component folder without cases fails; a case the implementation cannot build fails (nothing is skipped).
// Fixtures are written by tools/golden/*.py in the reference lab.
import { appendFileSync, existsSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import type { Engine } from '../../src/engine/engine';
import { Checkpoint } from '../../src/engine/safetensors';
import type { Tensor } from '../../src/engine/tensor';
import { assertClose, type HostTensor, type Tolerance } from '../engine/helpers';

export const WEIGHT_PREFIX = 'weight.';
export type GoldenKind = 'weight' | 'input' | 'output';

/** Upstream's own float16 run of a case against its float32 run, per output (tools/golden/common.py record_f16). */
export interface F16Error {
  /** max |f16 - f32| over the tensor */
  max: number;
  /** relative RMS error sqrt(sum (f16 - f32)^2 / sum f32^2) */
  rms: number;
  /** max |f32| */
  peak: number;
}

/**
 * The float16 rule: a Kiln f16 result passes when, against upstream's f32 output,
 *   every element:       |got - want| <= F16_RULE.max x max(e.max, FLOAT16_UNIT x e.peak)
 *   the whole tensor:    relative RMS  <= F16_RULE.rms x max(e.rms, FLOAT16_UNIT)
 * where e is upstream's own f16 error on the same case and tensor. So an f16 case fails only where Kiln is clearly
 * worse than float16 arithmetic itself (PyTorch's f16 run of the upstream module), whatever the config's scale.
 * The floor (float16's unit roundoff, 2^-11) covers tensors upstream keeps in f32 while Kiln rounds them to f16.
 * The multiples are measured, not guessed: over every committed case Kiln's f16 error reaches at most 0.74 of this
 * allowance (2.4x upstream's own max error, 1.9x its relative RMS; docs/models/README.md "Margins" lists the worst),
 * and different rounding orders of two correct float16 implementations give up to ~2x each other's maximum.
 */
export const F16_RULE = { max: 4, rms: 2 } as const;
export const FLOAT16_UNIT = 2 ** -11;

/**
 * The float32 rule: |got - want| <= max(atol + rtol |want|, F32_RULE.max x e.max) per element, where {atol, rtol} is
 * the fixture's stated f32 tolerance and e is upstream's own float32 error against its float64 run on that tensor
 * (f32_error). Exactness is not guaranteed in f32 either: where a deep stack's float32 rounding alone moves upstream's
 * output by more than the stated tolerance (the audio VAE and codec decoders, the Qwen-Image VAE at some configs), two
 * correct float32 implementations differ by about twice that; elsewhere the stated tolerance is the bound.
 */
export const F32_RULE = { max: 4 } as const;

/** The repository root (the compiled tests run from build/run-<pid>/test/...). */
export function repoRoot(): string {
  let dir = __dirname;
  while (!(existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'test')))) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`golden: no repository root above ${__dirname}`);
    dir = up;
  }
  return dir;
}

export function goldenDir(model: string, component: string): string {
  return join(repoRoot(), 'test', 'fixtures', 'golden', model, component);
}

/** Case files of a component, sorted; [] when the folder is missing or empty. */
export function goldenCaseFiles(model: string, component: string): string[] {
  const dir = goldenDir(model, component);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.safetensors'))
    .sort()
    .map((f) => join(dir, f));
}

export class GoldenCase {
  private constructor(
    readonly path: string,
    /** The fixture as a checkpoint: a model loads its weights from it with key prefix `weight.` + its own prefix. */
    readonly ckpt: Checkpoint,
    /** The upstream config at its tiny size. */
    readonly config: Record<string, unknown>,
    readonly upstream: string,
    readonly seed: number,
    private readonly tolerances: Record<string, Tolerance>,
    private readonly f16Errors: Record<string, F16Error> | undefined,
    private readonly f32Errors: Record<string, F16Error> | undefined,
  ) {}

  static async open(path: string): Promise<GoldenCase> {
    const ckpt = await Checkpoint.open(path);
    const meta = ckpt.metadata;
    const bad = (why: string) => new Error(`golden ${path}: ${why}`);
    for (const k of ['config', 'upstream', 'seed', 'tolerance']) if (typeof meta[k] !== 'string') throw bad(`__metadata__ has no "${k}"`);
    let config: unknown;
    let tolerance: unknown;
    try {
      config = JSON.parse(meta.config!);
      tolerance = JSON.parse(meta.tolerance!);
    } catch (e) {
      throw bad(`__metadata__ config/tolerance is not JSON (${(e as Error).message})`);
    }
    if (!config || typeof config !== 'object' || Array.isArray(config)) throw bad('config is not a JSON object');
    if (!tolerance || typeof tolerance !== 'object') throw bad('tolerance is not a JSON object');
    for (const [dt, t] of Object.entries(tolerance as Record<string, Tolerance>)) {
      if (!(t.atol >= 0) || !(t.rtol >= 0)) throw bad(`tolerance.${dt} needs atol and rtol >= 0`);
    }
    for (const k of ckpt.keys()) {
      if (!/^(weight|input|output)\./.test(k)) throw bad(`tensor "${k}" is not weight.*, input.* or output.*`);
    }
    const errors = (key: 'f16_error' | 'f32_error'): Record<string, F16Error> | undefined => {
      if (meta[key] === undefined) return undefined;
      let parsed: Record<string, F16Error>;
      try {
        parsed = JSON.parse(meta[key]!) as Record<string, F16Error>;
      } catch (e) {
        throw bad(`__metadata__ ${key} is not JSON (${(e as Error).message})`);
      }
      for (const [name, err] of Object.entries(parsed)) {
        if (!(err.max >= 0 && err.rms >= 0 && err.peak >= 0)) throw bad(`${key}.${name} needs max, rms and peak >= 0`);
      }
      return parsed;
    };
    return new GoldenCase(path, ckpt, config as Record<string, unknown>, meta.upstream!, Number(meta.seed), tolerance as Record<string, Tolerance>,
      errors('f16_error'), errors('f32_error'));
  }

  get name(): string {
    return basename(this.path, '.safetensors');
  }

  /** Tensor names of one kind, without the prefix. */
  names(kind: GoldenKind): string[] {
    const p = `${kind}.`;
    return this.ckpt.keys().filter((k) => k.startsWith(p)).map((k) => k.slice(p.length));
  }

  has(kind: GoldenKind, name: string): boolean {
    return this.ckpt.has(`${kind}.${name}`);
  }

  shape(kind: GoldenKind, name: string): number[] {
    return [...this.ckpt.entry(`${kind}.${name}`).shape];
  }

  async tensor(kind: GoldenKind, name: string): Promise<HostTensor> {
    const key = `${kind}.${name}`;
    return { data: Float64Array.from(await this.ckpt.readFloat32(key)), shape: [...this.ckpt.entry(key).shape] };
  }

  input(name: string): Promise<HostTensor> {
    return this.tensor('input', name);
  }

  output(name: string): Promise<HostTensor> {
    return this.tensor('output', name);
  }

  weight(name: string): Promise<HostTensor> {
    return this.tensor('weight', name);
  }

  /** An integer input (token ids, positions) as plain numbers; throws if a value is not an integer. */
  async ints(name: string): Promise<{ data: number[]; shape: number[] }> {
    const t = await this.input(name);
    const data = Array.from(t.data);
    const i = data.findIndex((v) => !Number.isInteger(v));
    if (i >= 0) throw new Error(`golden ${this.path}: input.${name}[${i}] = ${data[i]} is not an integer`);
    return { data, shape: t.shape };
  }

  /** The stated tolerance for a compute dtype (f32, f16, int8, ...); a missing one is an error. */
  tol(dtype: string): Tolerance {
    const t = this.tolerances[dtype];
    if (!t) throw new Error(`golden ${this.path}: no tolerance for ${dtype} (has ${Object.keys(this.tolerances).join(', ')})`);
    return t;
  }

  /** Upstream's own f16 error on output.<name>; a case without one cannot be checked in f16, which is an error. */
  f16Error(name: string): F16Error {
    const e = this.f16Errors?.[name];
    if (!e) {
      throw new Error(`golden ${this.path}: no f16_error for output.${name} (regenerate the case with tools/golden/, which ` +
        `records upstream's own float16 error: common.py record_f16)`);
    }
    return e;
  }

  /** The f16 rule's allowance for output.<name> (see F16_RULE). */
  f16Allowance(name: string): { atol: number; rms: number } {
    return f16Allowance(this.f16Error(name));
  }

  /** Upstream's own f32 error against float64 on output.<name> (undefined for cases made before it was recorded). */
  f32Error(name: string): F16Error | undefined {
    return this.f32Errors?.[name];
  }

  /**
   * got (a result of compute dtype `variant`) against `want` (output.<name>, possibly reshaped or row-selected by
   * the caller): int8 at the fixture's stated tolerance, f32 by the float32 rule, f16 by the float16 rule.
   */
  expect(variant: 'f32' | 'f16' | 'int8', got: Got, want: HostTensor, name: string, label = `${name} (${variant})`): void {
    if (variant === 'f16') expectF16(got, want, this.f16Error(name), label);
    else if (variant === 'f32') expectF32(got, want, this.tol('f32'), this.f32Error(name), label);
    else expectClose(got, want, this.tol(variant), label);
  }

  close(): Promise<void> {
    return this.ckpt.close();
  }
}

export function f16Allowance(e: F16Error): { atol: number; rms: number } {
  return { atol: F16_RULE.max * Math.max(e.max, FLOAT16_UNIT * e.peak), rms: F16_RULE.rms * Math.max(e.rms, FLOAT16_UNIT) };
}

/** A result to compare: its values (flat, row-major), or its values with the shape Kiln computed them in. */
export type Got = ArrayLike<number> | { readonly data: ArrayLike<number>; readonly shape: readonly number[] };

const fmt = (shape: readonly number[]): string => `[${shape.join(', ')}]`;

/**
 * The result's values, once they are known to match the reference element for element: the reference's data fills
 * its shape, the result has as many elements, and a result given with a shape has the reference's shape (leading
 * and inner dims of 1 are not dropped: a (1, L, D) result against an (L, D) reference is a mismatch, as it is
 * upstream's shape that is compared). Throws an error that names the tensor (`label`) otherwise.
 */
export function expectShape(got: Got, want: HostTensor, label: string): ArrayLike<number> {
  const wantCount = want.shape.reduce((a, n) => a * n, 1);
  if (want.data.length !== wantCount) {
    throw new Error(`${label}: the reference has ${want.data.length} elements for its shape ${fmt(want.shape)} (${wantCount})`);
  }
  const shaped = !isFlat(got);
  const data = shaped ? got.data : got;
  if (shaped && (got.shape.length !== want.shape.length || got.shape.some((n, i) => n !== want.shape[i]))) {
    throw new Error(`${label}: shape ${fmt(got.shape)}, reference has ${fmt(want.shape)}`);
  }
  if (data.length !== want.data.length) {
    throw new Error(`${label}: ${data.length} elements, reference has ${want.data.length} (shape ${fmt(want.shape)})`);
  }
  return data;
}

function isFlat(got: Got): got is ArrayLike<number> {
  return !('shape' in got && Array.isArray((got as { shape: unknown }).shape) && 'data' in got);
}

/** The float16 rule (F16_RULE) for one tensor, given upstream's own f16 error on it. */
export function expectF16(result: Got, want: HostTensor, e: F16Error, label: string): void {
  const got = expectShape(result, want, label);
  const a = f16Allowance(e);
  const rms = relRms(got, want);
  let worst = 0;
  for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want.data[i]!));
  recordMargin(label, 'f16', Math.max(worst / a.atol, rms / a.rms), { maxRatio: worst / Math.max(e.max, 1e-30), rmsRatio: rms / Math.max(e.rms, 1e-30) });
  if (!(rms <= a.rms)) {
    throw new Error(`${label}: relative RMS error ${rms.toExponential(3)} > ${a.rms.toExponential(3)} (${F16_RULE.rms} x upstream's own ` +
      `f16 ${e.rms.toExponential(3)}, floor ${FLOAT16_UNIT.toExponential(3)})`);
  }
  assertClose(got, want, { atol: a.atol, rtol: 0 },
    `${label} (f16 rule: ${F16_RULE.max} x upstream's own f16 max error ${e.max.toExponential(3)}, peak ${e.peak.toPrecision(3)})`);
}

/** The float32 rule (F32_RULE) for one tensor: the stated tolerance, or a multiple of upstream's own f32 error. */
export function expectF32(result: Got, want: HostTensor, tol: Tolerance, e: F16Error | undefined, label: string): void {
  const got = expectShape(result, want, label);
  const floor = e ? F32_RULE.max * e.max : 0;
  let used = 0;
  let worst = 0;
  for (let i = 0; i < got.length; i++) {
    const d = Math.abs(got[i]! - want.data[i]!);
    worst = Math.max(worst, d);
    if (d > 0) used = Math.max(used, d / Math.max(tol.atol + tol.rtol * Math.abs(want.data[i]!), floor));
  }
  recordMargin(label, 'f32', used, e ? { maxRatio: worst / Math.max(e.max, 1e-30) } : {});
  if (!(used <= 1)) {
    // the same message as assertClose, with the rule that was applied
    const bound = (i: number) => Math.max(tol.atol + tol.rtol * Math.abs(want.data[i]!), floor);
    let bad = 0;
    let at = 0;
    for (let i = 0; i < got.length; i++) {
      const x = Math.abs(got[i]! - want.data[i]!) - bound(i);
      if (!(x <= 0)) bad++;
      if (!(x <= Math.abs(got[at]! - want.data[at]!) - bound(at))) at = i;
    }
    throw new Error(`${label}: ${bad}/${got.length} elements outside atol=${tol.atol} rtol=${tol.rtol}` +
      (e ? ` or ${F32_RULE.max} x upstream's own f32 error against float64 (${e.max.toExponential(3)})` : ' (no f32_error recorded)') +
      `; worst at flat ${at}: got ${got[at]}, want ${want.data[at]}`);
  }
}

let currentCase = '';

/** With GOLDEN_MARGINS set: one JSON line per comparison, `used` = the largest fraction of its allowance reached. */
function recordMargin(label: string, kind: string, used: number, extra: Record<string, number> = {}): void {
  const file = process.env.GOLDEN_MARGINS;
  if (!file) return;
  appendFileSync(file, JSON.stringify({ case: currentCase, label, kind, used, ...extra }) + '\n');
}

/**
 * One node:test per case file of test/fixtures/golden/<model>/<component>/, inside describe(`<model>/<component>`)
 * (a `variant` such as "f16" is appended to the suite name). The case is opened before and closed after `body`.
 */
export function goldenTests(model: string, component: string, body: (c: GoldenCase, t: TestContext) => Promise<void>, variant?: string): void {
  const files = goldenCaseFiles(model, component);
  describe(`golden ${model}/${component}${variant ? ` (${variant})` : ''}`, () => {
    if (files.length === 0) {
      test('has cases', () => {
        throw new Error(`no golden cases in ${goldenDir(model, component)}: generate them with tools/golden/`);
      });
      return;
    }
    for (const f of files) {
      test(basename(f, '.safetensors'), async (t) => {
        const c = await GoldenCase.open(f);
        currentCase = `${model}/${component}/${c.name}`;
        try {
          await body(c, t);
        } catch (e) {
          if (e instanceof Error) e.message = `${c.name} (${c.upstream}, seed ${c.seed}): ${e.message}`;
          throw e;
        } finally {
          currentCase = ''; // comparisons outside a case (harness tests, hand-made fixtures) are not this case's
          await c.close();
        }
      });
    }
  });
}

/** |got - want| <= atol + rtol * |want| everywhere (see test/engine/helpers.ts assertClose). */
export function expectClose(result: Got, want: HostTensor, tol: Tolerance, label: string): void {
  const got = expectShape(result, want, label);
  if (process.env.GOLDEN_MARGINS) {
    let used = 0;
    for (let i = 0; i < got.length; i++) {
      const d = Math.abs(got[i]! - want.data[i]!);
      if (d > 0) used = Math.max(used, d / (tol.atol + tol.rtol * Math.abs(want.data[i]!)));
    }
    recordMargin(label, 'close', used);
  }
  assertClose(got, want, tol, label);
}

/** Relative RMS error sqrt(sum (got - want)^2 / sum want^2). */
export function relRms(got: ArrayLike<number>, want: HostTensor): number {
  let se = 0;
  let sw = 0;
  for (let i = 0; i < got.length; i++) {
    se += (got[i]! - want.data[i]!) ** 2;
    sw += want.data[i]! ** 2;
  }
  return Math.sqrt(se / sw);
}

/** expectClose with atol scaled by the stage's peak |want| (at least 1): for deep conv stacks whose error grows with the values. */
export function expectCloseToPeak(got: Got, want: HostTensor, tol: Tolerance, label: string): void {
  const peak = want.data.reduce((m, v) => Math.max(m, Math.abs(v)), 1);
  expectClose(got, want, { atol: tol.atol * peak, rtol: tol.rtol }, `${label}, atol x peak ${peak.toFixed(1)}`);
}

/**
 * Keeps the rows (positions along dim `dim` of a [B, L, ...] tensor, flattened over B) where keep[b*L + l] is
 * nonzero: compares only the real tokens of a padded batch.
 */
export function selectRows(data: ArrayLike<number>, shape: readonly number[], keep: ArrayLike<number>): HostTensor {
  const rows = shape[0]! * shape[1]!;
  const width = data.length / rows;
  if (keep.length !== rows) throw new RangeError(`selectRows: ${keep.length} flags for ${rows} rows`);
  const out: number[] = [];
  for (let r = 0; r < rows; r++) if (keep[r]) for (let j = 0; j < width; j++) out.push(data[r * width + j]!);
  return { data: Float64Array.from(out), shape: [out.length / width, width] };
}

/** A tensor's values with its shape, for the shape check of every comparison (expectShape). */
export async function readShaped(e: Engine, t: Tensor): Promise<{ data: Float32Array; shape: readonly number[] }> {
  return { data: await e.read(t), shape: [...t.shape] };
}

/**
 * A (1, ...) fixture tensor as its one sample (...), for the models that run one sample at a time (MiniMax H3's packed
 * rows, its video VAE); a case of another batch is refused by name rather than read as its first sample.
 */
export function oneSample(t: HostTensor, name: string): HostTensor {
  if (t.shape[0] !== 1) throw new Error(`${name}: shape [${t.shape.join(', ')}]: this test runs one sample (batch 1)`);
  return { data: t.data, shape: t.shape.slice(1) };
}
