// The GEMM tuning table: which GEMM kernel (register-tiled or tensor-core) and which tensor-core variant an adapter
// runs fastest, per shape class, measured by the sweep of scripts/gpu-run.sh (bench/engine/main.ts --tuning-out)
// and committed as tuning/<vendor>-<architecture>.json. The engine reads the tables once when it is created
// (Engine.tuning) and gemm() asks it for the shape at hand.
//
// A table names its adapter: vendor and architecture must match the running adapter's; device and driver, when the
// table gives them, must match too (a table measured on one driver is not trusted on another: the sweep is cheap to
// rerun). The most specific match wins. No table for the adapter -> DEFAULT_GEMM (the register-tiled kernel, the
// tensor-core one only under KILN_SUBGROUP_MATRIX=1, as before tables existed). A table that does not parse or
// validate is skipped with one log line naming the file and why; it never stops the engine.
//
// The format (version 1):
//   { "version": 1,
//     "adapter": { "vendor": "nvidia", "architecture": "hopper", "device": "...", "driver": "..." },
//     "measured": "2026-12-03T18:00:00Z by bench/engine/main.ts --sizes large",   (free text, optional)
//     "gemm": { "<class>": { "path": "subgroup", "variant": "128" }, ... },
//     "attention": { "path": "subgroup", "variant": "g16x4k32" },   (optional, issue 43)
//     "rates": { "gemm": { "large": 310.5, ... }, "attention": 160.2, "memory_gbs": 3900, "dispatch_us": 6.1 } }
//                                                                     (optional: what the winners ran at in the sweep)
// with <class> one of SHAPE_CLASSES (shapeClass()), path 'tiled' or 'subgroup', and variant (subgroup only) a name
// the tensor-core GEMM knows (SUBGROUP_TILES). A class the table leaves out takes DEFAULT_GEMM's entry. `attention`
// is the f16 attention's kernel, measured at Krea 1K's shape: 'flash', or 'subgroup' with a tile the tensor-core
// attention knows (ATTENTION_TILES); left out, attention keeps its default (flash; KILN_SUBGROUP_MATRIX=1 opts in).
// `rates` are the sweep's own measurements of its winners: TFLOP/s of the GEMM per shape class (its shapes' FLOPs
// over their summed times) and of the attention at Krea 1K, the memory-bound ops' GB/s (softmax and sum rows), and
// one empty dispatch's cost in microseconds. `npm run plan` turns a step's work per rate class into seconds with
// them (src/plan/step-time.ts); the kernels' choice never reads them.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../paths';

/** What identifies an adapter to a table. */
export interface AdapterKey { vendor: string; architecture: string; device: string; driver: string }

/** GEMM shape classes by output size M*N (what decides how well a tile fills the GPU): under 2^18 (512x512), under
 * 2^24 (4096x4096), and above (the DiT projections and FFNs at 1K and up: Krea 1K's 4165x6144 is 2^24.6). */
export const SHAPE_CLASSES = ['small', 'medium', 'large'] as const;
export type ShapeClass = (typeof SHAPE_CLASSES)[number];

export function shapeClass(M: number, N: number): ShapeClass {
  const mn = M * N;
  return mn < 2 ** 18 ? 'small' : mn < 2 ** 24 ? 'medium' : 'large';
}

export interface GemmChoice {
  path: 'tiled' | 'subgroup';
  /** The tensor-core variant (a SUBGROUP_TILES name); path 'subgroup' only. */
  variant?: string;
}

export interface AttentionChoice {
  path: 'flash' | 'subgroup';
  /** The tensor-core attention's tile (an ATTENTION_TILES name); path 'subgroup' only. */
  variant?: string;
}

export interface TuningTable {
  version: 1;
  adapter: { vendor: string; architecture: string; device?: string; driver?: string };
  measured?: string;
  gemm: Partial<Record<ShapeClass, GemmChoice>>;
  attention?: AttentionChoice;
  rates?: MeasuredRates;
}

/** What the sweep measured its winners at (all optional: a rate the sweep did not measure is left out). */
export interface MeasuredRates {
  /** TFLOP/s of the GEMM chosen for each shape class. */
  gemm?: Partial<Record<ShapeClass, number>>;
  /** TFLOP/s of the chosen f16 attention (at Krea 1K's shape). */
  attention?: number;
  /** GB/s of the memory-bound ops (bytes bound per second). */
  memory_gbs?: number;
  /** Microseconds one dispatch costs when its work is nothing (recorded and run to the GPU's end). */
  dispatch_us?: number;
}

/** No table and no passed tensor-core check (tensor-cores.ts): the register-tiled kernel everywhere (the tensor-core
 * path opt-in, KILN_SUBGROUP_MATRIX=1). */
export const DEFAULT_GEMM: Record<ShapeClass, GemmChoice> = { small: { path: 'tiled' }, medium: { path: 'tiled' }, large: { path: 'tiled' } };

export class Tuning {
  constructor(
    /** The table in use, or null (defaults). */
    readonly table: TuningTable | null,
    /** Its file, or why there is none (for describe() and logs). */
    readonly source: string,
  ) {}

  /** The GEMM choice for an M x N output: the table's, else the default's; with `tensorCores` (the engine's
   * self-test passed: tensor-cores.ts) the default takes the tensor-core kernel for medium and large outputs. */
  gemm(M: number, N: number, tensorCores = false): GemmChoice {
    const c = shapeClass(M, N);
    return this.table?.gemm[c] ?? (tensorCores && c !== 'small' ? { path: 'subgroup' } : DEFAULT_GEMM[c]);
  }

  /** The f16 attention's kernel (the table's, else flash: the tensor-core one stays opt-in without a table). */
  attention(): AttentionChoice {
    return this.table?.attention ?? { path: 'flash' };
  }
}

/** Throws a message saying what is wrong with `v` as a table; `variants` are the names a GEMM 'subgroup' entry may
 * use, `attentionVariants` those of an attention one. */
export function validateTuningTable(v: unknown, variants: readonly string[], attentionVariants: readonly string[] = []): TuningTable {
  const obj = (x: unknown, what: string): Record<string, unknown> => {
    if (typeof x !== 'object' || x === null || Array.isArray(x)) throw new Error(`${what} is not an object`);
    return x as Record<string, unknown>;
  };
  const t = obj(v, 'the table');
  if (t.version !== 1) throw new Error(`version ${JSON.stringify(t.version)}: only 1 is known`);
  const a = obj(t.adapter, 'adapter');
  for (const k of ['vendor', 'architecture'] as const) {
    if (typeof a[k] !== 'string' || a[k] === '') throw new Error(`adapter.${k} must be a non-empty string`);
  }
  for (const k of ['device', 'driver'] as const) {
    if (a[k] !== undefined && typeof a[k] !== 'string') throw new Error(`adapter.${k} must be a string when given`);
  }
  if (t.measured !== undefined && typeof t.measured !== 'string') throw new Error('measured must be a string when given');
  const g = obj(t.gemm, 'gemm');
  for (const [cls, raw] of Object.entries(g)) {
    if (!(SHAPE_CLASSES as readonly string[]).includes(cls)) throw new Error(`gemm.${cls}: not a shape class (${SHAPE_CLASSES.join(', ')})`);
    const c = obj(raw, `gemm.${cls}`);
    if (c.path === 'tiled') {
      if (c.variant !== undefined) throw new Error(`gemm.${cls}: a variant is for path 'subgroup' only`);
    } else if (c.path === 'subgroup') {
      if (typeof c.variant !== 'string' || !variants.includes(c.variant)) {
        throw new Error(`gemm.${cls}: variant ${JSON.stringify(c.variant)} unknown (one of ${variants.join(', ')})`);
      }
    } else throw new Error(`gemm.${cls}: path ${JSON.stringify(c.path)}: 'tiled' or 'subgroup'`);
  }
  if (t.attention !== undefined) {
    const c = obj(t.attention, 'attention');
    if (c.path === 'flash') {
      if (c.variant !== undefined) throw new Error(`attention: a variant is for path 'subgroup' only`);
    } else if (c.path === 'subgroup') {
      if (typeof c.variant !== 'string' || !attentionVariants.includes(c.variant)) {
        throw new Error(`attention: variant ${JSON.stringify(c.variant)} unknown (one of ${attentionVariants.join(', ')})`);
      }
    } else throw new Error(`attention: path ${JSON.stringify(c.path)}: 'flash' or 'subgroup'`);
  }
  if (t.rates !== undefined) {
    const r = obj(t.rates, 'rates');
    const rate = (x: unknown, what: string) => {
      if (typeof x !== 'number' || !Number.isFinite(x) || x <= 0) throw new Error(`${what} must be a positive number (got ${JSON.stringify(x)})`);
    };
    for (const k of Object.keys(r)) if (!['gemm', 'attention', 'memory_gbs', 'dispatch_us'].includes(k)) throw new Error(`rates.${k}: unknown (gemm, attention, memory_gbs, dispatch_us)`);
    if (r.gemm !== undefined) {
      for (const [cls, x] of Object.entries(obj(r.gemm, 'rates.gemm'))) {
        if (!(SHAPE_CLASSES as readonly string[]).includes(cls)) throw new Error(`rates.gemm.${cls}: not a shape class (${SHAPE_CLASSES.join(', ')})`);
        rate(x, `rates.gemm.${cls}`);
      }
    }
    for (const k of ['attention', 'memory_gbs', 'dispatch_us'] as const) if (r[k] !== undefined) rate(r[k], `rates.${k}`);
  }
  return t as unknown as TuningTable;
}

/** How well `t` fits `key`: -1 no match, else the number of optional fields (device, driver) it pins. */
function specificity(t: TuningTable, key: AdapterKey): number {
  const a = t.adapter;
  if (a.vendor.toLowerCase() !== key.vendor.toLowerCase() || a.architecture.toLowerCase() !== key.architecture.toLowerCase()) return -1;
  if (a.device !== undefined && a.device !== key.device) return -1;
  if (a.driver !== undefined && a.driver !== key.driver) return -1;
  return (a.device !== undefined ? 1 : 0) + (a.driver !== undefined ? 1 : 0);
}

/** The file name a sweep's table goes to: tuning/<vendor>-<architecture>.json (lower case, [a-z0-9-]). */
export function tuningFileName(key: Pick<AdapterKey, 'vendor' | 'architecture'>): string {
  const slug = (s: string) => s.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '') || 'unknown';
  return `${slug(key.vendor)}-${slug(key.architecture)}.json`;
}

/** The tables in `dir` (default the repository's tuning/), the best match for `key` in use. A file that does not
 * read, parse or validate costs one `log` line and is skipped; nothing here throws. */
export function loadTuning(key: AdapterKey, variants: readonly string[], dir = join(projectRoot(), 'tuning'), log: (line: string) => void = (l) => console.warn(l),
  attentionVariants: readonly string[] = []): Tuning {
  let names: string[] = [];
  try {
    names = existsSync(dir) ? readdirSync(dir).filter((n) => n.endsWith('.json')).sort() : [];
  } catch (err) {
    log(`tuning: cannot list ${dir}: ${(err as Error).message}; GEMM defaults in use`);
  }
  let best: { t: TuningTable; file: string; s: number } | null = null;
  for (const n of names) {
    const file = join(dir, n);
    let t: TuningTable;
    try {
      t = validateTuningTable(JSON.parse(readFileSync(file, 'utf8')), variants, attentionVariants);
    } catch (err) {
      log(`tuning: ${file} ignored (${(err as Error).message.split('\n')[0]}); GEMM defaults for its adapter`);
      continue;
    }
    const s = specificity(t, key);
    if (s > (best?.s ?? -1)) best = { t, file, s };
  }
  return best ? new Tuning(best.t, best.file) : new Tuning(null, `no table in ${dir} for ${key.vendor}/${key.architecture}`);
}
