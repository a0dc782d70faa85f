// The golden-vector harness every model test uses (fixture format: shared/spec/models.md "Golden vectors").
//   test/fixtures/golden/<model>/<component>/<case>.safetensors
//     weight.<checkpoint key>  parameters, input.<name>  inputs (integers stored as F32), output.<name>  results
//     __metadata__: config (upstream config JSON), upstream (repository + version), seed, tolerance ({dtype: {atol, rtol}})
// goldenTests(model, component, body) registers one node:test per case file, so a new case needs no code.
// A component folder without cases fails; a case the implementation cannot build fails (nothing is skipped).
// Fixtures are written by tools/golden/*.py in the reference lab.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { Checkpoint } from '../../src/engine/safetensors';
import { assertClose, type HostTensor, type Tolerance } from '../engine/helpers';

export const WEIGHT_PREFIX = 'weight.';
export type GoldenKind = 'weight' | 'input' | 'output';

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
    return new GoldenCase(path, ckpt, config as Record<string, unknown>, meta.upstream!, Number(meta.seed), tolerance as Record<string, Tolerance>);
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

  close(): Promise<void> {
    return this.ckpt.close();
  }
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
        try {
          await body(c, t);
        } catch (e) {
          if (e instanceof Error) e.message = `${c.name} (${c.upstream}, seed ${c.seed}): ${e.message}`;
          throw e;
        } finally {
          await c.close();
        }
      });
    }
  });
}

/** |got - want| <= atol + rtol * |want| everywhere (see test/engine/helpers.ts assertClose). */
export function expectClose(got: ArrayLike<number>, want: HostTensor, tol: Tolerance, label: string): void {
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
export function expectCloseToPeak(got: ArrayLike<number>, want: HostTensor, tol: Tolerance, label: string): void {
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
