// One thread of quantize-parallel.ts's pool: decodes a block of rows of a checkpoint tensor's raw bytes (shared
// memory) and quantises them with quantizeRowsInto, writing q and scales into shared memory. No GPU, no files.
import { parentPort } from 'node:worker_threads';
import { quantizeRowsInto } from './quantize';
import { decodeSafe, SAFE_DTYPE_BYTES, type SafeDType } from './safetensors';

/** One block of rows [first, first + rows) of an (N, K) tensor. */
export interface QuantizeTask {
  id: number;
  raw: SharedArrayBuffer;
  dtype: SafeDType;
  K: number;
  first: number;
  rows: number;
  q: SharedArrayBuffer;
  scales: SharedArrayBuffer;
}

export type QuantizeReply = { id: number; error?: string };

/** Rows decoded at a time: about 4 MiB of float32 per slice, whatever K is. */
const SLICE_ELEMENTS = 1 << 20;

export function runTask(t: QuantizeTask): void {
  const elem = SAFE_DTYPE_BYTES[t.dtype];
  const step = Math.max(1, Math.floor(SLICE_ELEMENTS / t.K));
  for (let r = 0; r < t.rows; r += step) {
    const n = Math.min(step, t.rows - r);
    const row = t.first + r;
    const bytes = new Uint8Array(t.raw, row * t.K * elem, n * t.K * elem);
    const values = decodeSafe(bytes, t.dtype);
    quantizeRowsInto(values, t.K, n, new Int8Array(t.q, row * t.K, n * t.K), new Float32Array(t.scales, row * 4, n), row);
  }
}

parentPort?.on('message', (t: QuantizeTask) => {
  let reply: QuantizeReply = { id: t.id };
  try {
    runTask(t);
  } catch (err) {
    reply = { id: t.id, error: (err as Error).message };
  }
  parentPort!.postMessage(reply);
});
