/// <reference types="@webgpu/types" />
// Loading Dawn's Node bindings (npm `webgpu`, an ES module) from our CommonJS build, and the
// WebGPU flag constants, so nothing has to be copied onto globalThis.
import { pathToFileURL } from 'node:url';

export interface DawnModule {
  /** `create(['enable-dawn-features=a,b', ...])` returns a navigator.gpu-like object. Node does not exit
   * while that object is referenced: drop it on shutdown. */
  create(options: string[]): GPU;
  globals: Record<string, unknown>;
}

// tsc with module=commonjs rewrites `import()` into `require()`, which cannot load an ES module on
// Node 20; a Function keeps the real dynamic import.
const importEsm = new Function('specifier', 'return import(specifier)') as (s: string) => Promise<unknown>;
let loading: Promise<DawnModule> | undefined;

export function loadDawn(): Promise<DawnModule> {
  loading ??= importEsm(pathToFileURL(require.resolve('webgpu')).href) as Promise<DawnModule>;
  return loading;
}

/** GPUBufferUsage values (fixed by the WebGPU spec). */
export const BufferUsage = {
  MAP_READ: 0x1,
  MAP_WRITE: 0x2,
  COPY_SRC: 0x4,
  COPY_DST: 0x8,
  UNIFORM: 0x40,
  STORAGE: 0x80,
  QUERY_RESOLVE: 0x200,
} as const;

/** GPUMapMode values. */
export const MapMode = { READ: 0x1, WRITE: 0x2 } as const;
