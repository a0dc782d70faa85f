// Kernels: shaders/<family>.wgsl + a one-line dtype header, specialised with `override` constants,
// compiled once per (shader, entry, dtype, constants) and cached.
//
// Header: `enable f16; <hoisted enables> alias T = f16;` (or `alias T = f32;`). `enable` lines in the file are
// hoisted into the header (blanked in place) so line numbers in errors are the file's own.
// Includes: a line `//#include "common/act.wgsl"` is replaced by that file's text (path under shaders/), once per
// compiled kernel (a repeat becomes a blank comment), nested includes expanded in place. WGSL has no include,
// and the shared pieces (activation, weight decoding, index helpers) would otherwise be copied per shader.
// Compile errors name `line N` of the shader itself, or `<include> line N` for a line of an included file.
// Refused before compiling: a `var x: T;` without an initializer inside a block (uninitialisedInBlock below).
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
  // diagnostic directives must also precede every declaration (the alias below is one): hoist them too.
  const diagnostics: string[] = [];
  const rest = body.replace(/^[ \t]*(diagnostic[ \t]*\([^)]*\)[ \t]*;)[ \t]*$/gm, (_m, d: string) => {
    diagnostics.push(d);
    return '// (diagnostic hoisted into the header)';
  });
  const en = [...diagnostics, ...[...enables].map((e) => `enable ${e};`)].join(' ');
  const alias = dtype === 'f16' ? 'alias T = f16;' : 'alias T = f32;';
  return `${en}${en ? ' ' : ''}${alias}\n${rest}`;
}

/** Where a line of expanded WGSL came from: its file ('' for the shader itself) and 1-based line. */
export interface SourceLine {
  readonly file: string;
  readonly line: number;
}

export interface Expanded {
  readonly text: string;
  /** lines[i]: the origin of line i + 1 of text. */
  readonly lines: readonly SourceLine[];
}

const INCLUDE = /^[ \t]*\/\/#include[ \t]+"([^"]+)"[ \t]*$/;

/**
 * Expands `//#include "<path>"` lines of `source` (named `name` in errors): each path is read by `read` (relative to
 * shaders/) once per expansion, recursively; a repeat (or a cycle) is left as a comment line. Throws a KernelError
 * naming the including file and line when `read` fails.
 */
export function expandIncludes(source: string, name: string, read: (path: string) => string): Expanded {
  const out: string[] = [];
  const lines: SourceLine[] = [];
  const seen = new Set<string>();
  const walk = (text: string, file: string, shown: string): void => {
    text.split('\n').forEach((line, i) => {
      const m = INCLUDE.exec(line);
      if (!m) {
        out.push(line);
        lines.push({ file, line: i + 1 });
        return;
      }
      const path = m[1]!;
      out.push(seen.has(path) ? `// (already included: ${path})` : `// (included: ${path})`);
      lines.push({ file, line: i + 1 });
      if (seen.has(path)) return;
      seen.add(path);
      let inc: string;
      try {
        inc = read(path);
      } catch (e) {
        throw new KernelError(`${shown} line ${i + 1}: #include "${path}": ${(e as Error).message}`);
      }
      walk(inc.endsWith('\n') ? inc.slice(0, -1) : inc, path, path);
    });
  };
  walk(source, '', name);
  return { text: out.join('\n'), lines };
}

let compileMs = 0;
/** Whether work submitted to a GPU queue may still be running (set at each submit, cleared when a sync saw it all
 * done). A compile meanwhile runs on the CPU while the GPU computes, so it costs the run little or nothing. */
let submittedPending = false;

/** The recorder's submits and completed syncs, for kernelCompileS. */
export const gpuQueueActivity = {
  submitted(): void {
    submittedPending = true;
  },
  drained(): void {
    submittedPending = false;
  },
};

/** Seconds this process has spent compiling pipelines (all caches) while no submitted GPU work was pending: the
 * one-off work that lengthened a run, which a job's ETA leaves out of what its class takes (a later run of the same
 * shapes finds them compiled). A compile while the GPU still works is not counted: measured on lavapipe, a first
 * 256x256 image job compiled for 1.79 s of which 1.52 s overlapped its queued work, and a second run took as long as
 * the first less its load and 0.26 s, not less 1.79 s. */
export function kernelCompileS(): number {
  return compileMs / 1000;
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
    const t0 = performance.now();
    const src = this.expand(spec, name);
    const code = withHeader(src.text, spec.dtype);
    if (this.debug) this.device.pushErrorScope('validation');
    const module = this.device.createShaderModule({ code, label: name });
    const pipeline = this.device.createComputePipeline({
      layout: 'auto',
      label: name,
      compute: { module, entryPoint: spec.entry ?? 'main', constants: toConstants(spec.constants) },
    });
    const layout = pipeline.getBindGroupLayout(0);
    if (!submittedPending) compileMs += performance.now() - t0;
    if (this.debug) {
      const check = this.device.popErrorScope().then(async (err) => {
        if (err) throw new KernelError(`${name}: ${await compileMessages(module, err.message, src.lines)}`);
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
    const src = this.expand(spec, name);
    const code = withHeader(src.text, spec.dtype);
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
      throw new KernelError(`${name}: ${await compileMessages(module, (e as Error).message, src.lines)}`);
    }
    return this.get(spec);
  }

  /** The shader's text (spec.source or its file) with includes expanded; refuses an uninitialised block var. */
  private expand(spec: KernelSpec, name: string): Expanded {
    const text = spec.source ?? this.file(`${spec.shader}.wgsl`);
    const src = expandIncludes(text, name, (path) => this.file(path));
    const bad = uninitialisedInBlock(src.text);
    if (bad.length > 0) {
      const where = bad.map((i) => `${sourceLine(src.lines, i + 2)}: \`${src.text.split('\n')[i]!.trim()}\``).join('; ');
      throw new KernelError(`${name}: ${where}: a variable declared inside a block needs an initializer (Dawn does not re-zero it per loop iteration)`);
    }
    return src;
  }

  /** A file under shaderDir (cached; includes are read once per cache). */
  private file(path: string): string {
    let src = this.sources.get(path);
    if (src === undefined) {
      src = readFileSync(join(this.shaderDir, path), 'utf8');
      this.sources.set(path, src);
    }
    return src;
  }
}

function toConstants(c: Constants | undefined): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(c ?? {})) out[k] = Number(v);
  return out;
}

/**
 * Compiler messages with source line numbers: the header is line 1 of the compiled text, then line i + 2 is
 * lines[i] (`line N` of the shader, or `common/x.wgsl line N` of an include).
 */
async function compileMessages(
  module: GPUShaderModule,
  fallback: string,
  lines: readonly SourceLine[],
): Promise<string> {
  const info = await module.getCompilationInfo();
  const errs = info.messages.filter((m) => m.type === 'error');
  if (errs.length === 0) return fallback;
  return errs.map((m) => `${sourceLine(lines, m.lineNum)}:${m.linePos}: ${m.message}`).join('; ');
}

/**
 * 0-based indices of the lines of `text` that declare a function variable without an initializer inside a block
 * (indented past a function's top level). Dawn (npm webgpu, on lavapipe) does not re-zero such a `var x: T;` on
 * each iteration of an enclosing loop as WGSL's zero value would: an accumulator declared so kept the previous
 * iteration's sum (the tensor-core attention, 2026-12-02; a 3-line kernel showed it for a scalar, a vector and an
 * array). Indentation is this project's WGSL style (2 spaces a level); a generator must follow it.
 */
export function uninitialisedInBlock(text: string): number[] {
  const out: number[] = [];
  text.split('\n').forEach((line, i) => {
    if (/^ {4,}var\s+\w+\s*:[^=]*;/.test(line)) out.push(i);
  });
  return out;
}

/** `line N` / `<include> line N` for line lineNum (1-based) of the compiled text. */
export function sourceLine(lines: readonly SourceLine[], lineNum: number): string {
  const at = lines[lineNum - 2];
  if (!at) return `line ${lineNum - 1}`;
  return at.file ? `${at.file} line ${at.line}` : `line ${at.line}`;
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
