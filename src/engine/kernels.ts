// Kernels: shaders/<family>.wgsl + a one-line dtype header, specialised with `override` constants,
// compiled once per (shader, entry, dtype, constants) and cached.
//
// Header: `enable f16; <hoisted enables> alias T = f16;` (or `alias T = f32;`). `enable` lines in the file are
// hoisted into the header (blanked in place) so line numbers in errors are the file's own.
// Bindings convention: @group(0) @binding(0) is the params uniform; @binding(1..) are the tensors in the order
// the wrapper passes them (outputs first). Pipelines use layout 'auto', so an entry point binds only what it uses.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../paths';
import type { DType } from './dtype';

export type Constants = Record<string, number | boolean>;

export interface KernelSpec {
  /** File stem under shaders/, e.g. 'elementwise'. */
  shader: string;
  /** Entry point; default 'main'. */
  entry?: string;
  /** Element type T of the activations ('f32' or 'f16'). */
  dtype: DType;
  /** Values for the shader's `override` declarations (tile sizes, op codes, flags). */
  constants?: Constants;
  /** WGSL text instead of the file (tests and generated kernels). */
  source?: string;
}

export interface Kernel {
  /** `elementwise.wgsl:binary<f16>{OP=0}`: what every error message names. */
  readonly name: string;
  readonly pipeline: GPUComputePipeline;
  readonly layout: GPUBindGroupLayout;
}

/** A WGSL compile/validation error, named after the kernel. */
export class KernelError extends Error {
  override readonly name = 'KernelError';
}

export function kernelName(spec: KernelSpec): string {
  const c = Object.entries(spec.constants ?? {})
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => `${k}=${Number(v)}`)
    .join(',');
  return `${spec.shader}.wgsl:${spec.entry ?? 'main'}<${spec.dtype}>${c ? `{${c}}` : ''}`;
}

/** The source with the dtype header as line 1 (file lines shift by one). */
export function withHeader(source: string, dtype: DType): string {
  const enables = new Set<string>();
  if (dtype === 'f16') enables.add('f16');
  const body = source.replace(/^[ \t]*enable[ \t]+([\w, \t]+);[ \t]*$/gm, (_m, names: string) => {
    for (const n of names.split(',')) if (n.trim()) enables.add(n.trim());
    return '// (enable hoisted into the header)';
  });
  const en = [...enables].map((e) => `enable ${e};`).join(' ');
  const alias = dtype === 'f16' ? 'alias T = f16;' : 'alias T = f32;';
  return `${en}${en ? ' ' : ''}${alias}\n${body}`;
}

export class KernelCache {
  private readonly pipelines = new Map<string, Kernel>();
  private readonly sources = new Map<string, string>();
  /** Debug mode: compile errors found asynchronously, thrown by the next Recorder.sync(). */
  readonly pendingChecks: Promise<void>[] = [];

  constructor(
    private readonly device: GPUDevice,
    private readonly debug: boolean,
    private readonly shaderDir = join(projectRoot(), 'shaders'),
  ) {}

  get size(): number {
    return this.pipelines.size;
  }

  /** The cached pipeline for spec, compiled now if new (synchronous; errors surface at the next sync in debug mode). */
  get(spec: KernelSpec): Kernel {
    const name = kernelName(spec);
    const key = spec.source ? `${name}#${spec.source}` : name;
    const hit = this.pipelines.get(key);
    if (hit) return hit;
    const code = withHeader(spec.source ?? this.file(spec.shader), spec.dtype);
    if (this.debug) this.device.pushErrorScope('validation');
    const module = this.device.createShaderModule({ code, label: name });
    const pipeline = this.device.createComputePipeline({
      layout: 'auto',
      label: name,
      compute: { module, entryPoint: spec.entry ?? 'main', constants: toConstants(spec.constants) },
    });
    const layout = pipeline.getBindGroupLayout(0);
    if (this.debug) {
      const check = this.device.popErrorScope().then(async (err) => {
        if (err) throw new KernelError(`${name}: ${await compileMessages(module, err.message)}`);
      });
      check.catch(() => undefined); // reported by sync(); avoid an unhandled rejection meanwhile
      this.pendingChecks.push(check);
    }
    const kernel: Kernel = { name, pipeline, layout };
    this.pipelines.set(key, kernel);
    return kernel;
  }

  /** Compiles asynchronously and throws a KernelError naming the shader at once (use for a precompile at boot). */
  async compile(spec: KernelSpec): Promise<Kernel> {
    const name = kernelName(spec);
    const code = withHeader(spec.source ?? this.file(spec.shader), spec.dtype);
    this.device.pushErrorScope('validation'); // keeps the module's own error out of onuncapturederror
    const module = this.device.createShaderModule({ code, label: name });
    void this.device.popErrorScope();
    try {
      await this.device.createComputePipelineAsync({
        layout: 'auto',
        label: name,
        compute: { module, entryPoint: spec.entry ?? 'main', constants: toConstants(spec.constants) },
      });
    } catch (e) {
      throw new KernelError(`${name}: ${await compileMessages(module, (e as Error).message)}`);
    }
    return this.get(spec);
  }

  private file(shader: string): string {
    let src = this.sources.get(shader);
    if (src === undefined) {
      src = readFileSync(join(this.shaderDir, `${shader}.wgsl`), 'utf8');
      this.sources.set(shader, src);
    }
    return src;
  }
}

function toConstants(c: Constants | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(c ?? {})) out[k] = Number(v);
  return out;
}

/** Compiler messages with file line numbers (the header is line 1 of the compiled text). */
async function compileMessages(module: GPUShaderModule, fallback: string): Promise<string> {
  const info = await module.getCompilationInfo();
  const errs = info.messages.filter((m) => m.type === 'error');
  if (errs.length === 0) return fallback;
  return errs.map((m) => `line ${m.lineNum - 1}:${m.linePos}: ${m.message}`).join('; ');
}

/**
 * Uniform parameter block builder. WGSL uniform layout: scalars 4 bytes; a vec4 (and every element of an
 * array in a uniform) is 16-byte aligned. Write fields in struct order; `vec4u`/`dims` pad for you.
 */
export class Params {
  private readonly view: DataView;
  private pos = 0;

  constructor(readonly capacity = 256) {
    this.view = new DataView(new ArrayBuffer(capacity));
  }

  u32(v: number): this {
    this.view.setUint32(this.pos, v >>> 0, true);
    this.pos += 4;
    return this;
  }

  i32(v: number): this {
    this.view.setInt32(this.pos, v | 0, true);
    this.pos += 4;
    return this;
  }

  f32(v: number): this {
    this.view.setFloat32(this.pos, v, true);
    this.pos += 4;
    return this;
  }

  /** Pads to a 16-byte boundary (before a vec4 or an array). */
  align16(): this {
    while (this.pos % 16) this.u32(0);
    return this;
  }

  /** `array<vec4<u32>, slots/4>` holding `values` then zeros (shapes and strides of up to `slots` dims). */
  dims(values: readonly number[], slots: number): this {
    this.align16();
    if (values.length > slots) throw new RangeError(`params: ${values.length} dims > ${slots} slots`);
    for (let i = 0; i < slots; i++) this.u32(values[i] ?? 0);
    return this;
  }

  bytes(): Uint8Array {
    return new Uint8Array(this.view.buffer, 0, Math.ceil(this.pos / 16) * 16 || 16);
  }
}
