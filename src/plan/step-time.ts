// A sampling step's predicted time from the rates a GPU sweep measured (the tuning table's `rates`, written by
// bench/engine/main.ts --tuning-out in scripts/gpu-run.sh's gemm step): the step's work per rate class (the meter's
// counts, engine/meter.ts) turned into seconds class by class and summed:
//   GEMM      FLOPs of each shape class / the TFLOP/s the class's chosen kernel ran at
//   attention FLOPs / the chosen attention's TFLOP/s (measured at Krea 1K's shape)
//   memory    bytes bound by every other dispatch / the memory-bound ops' GB/s
//   dispatch  dispatches x one empty dispatch's cost
// No overlap between dispatches is assumed, so the figure leans long where small kernels hide behind big ones. A
// class with work and no measured rate (a convolution in the step, a shape class the sweep did not measure) means
// no prediction, named, never a guessed rate.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RateClass, Work } from '../engine/meter';
import type { AdapterProfile } from '../engine/plan-device';
import { validateTuningTable, type MeasuredRates, type TuningTable } from '../engine/tuning';
import { ATTENTION_TILES } from '../engine/ops/attention_tiles';
import { SUBGROUP_TILES } from '../engine/ops/matmul_subgroup';
import { projectRoot } from '../paths';

export interface StepTime {
  /** Seconds per sampling step. */
  step_s: number;
  /** Seconds per class (gemm-large, attention, memory, dispatch, ...), the classes with work only. */
  by_class: Record<string, number>;
  /** The table and its measurement. */
  basis: string;
}

/** The step's time from `rates`, or what is missing for one. */
export function stepTime(perStep: Record<RateClass, Work>, rates: MeasuredRates, basis: string): StepTime | { missing: string[] } {
  const by: Record<string, number> = {};
  const missing: string[] = [];
  const at = (cls: string, rate: number | undefined, amount: number, scale: number, unit: string) => {
    if (amount <= 0) return;
    if (rate === undefined) missing.push(`${cls} (${unit} measured for it)`);
    else by[cls] = amount / (rate * scale);
  };
  for (const cls of ['small', 'medium', 'large'] as const) at(`gemm-${cls}`, rates.gemm?.[cls], perStep[`gemm-${cls}`].flops, 1e12, 'no TFLOP/s');
  at('attention', rates.attention, perStep.attention.flops, 1e12, 'no TFLOP/s');
  at('conv', undefined, perStep.conv.flops, 1e12, 'the sweep has no convolution rows: no TFLOP/s');
  at('memory', rates.memory_gbs, perStep.memory.bytes, 1e9, 'no GB/s');
  const dispatches = Object.values(perStep).reduce((a, w) => a + w.dispatches, 0);
  if (rates.dispatch_us === undefined) missing.push('dispatch (no dispatch cost measured)');
  else by.dispatch = dispatches * rates.dispatch_us * 1e-6;
  if (missing.length > 0) return { missing };
  return { step_s: Object.values(by).reduce((a, b) => a + b, 0), by_class: by, basis };
}

/** The committed table (tuning/, or `dir`) with measured rates for the adapter a plan stands for: its vendor, and
 * its architecture where the profile records one. One table or none: several candidates for an adapter whose
 * architecture the profile does not know are not guessed between. */
export function ratesFor(adapter: AdapterProfile, dir?: string): { table: TuningTable; file: string } | { none: string } {
  const defaultDir = join(projectRoot(), 'tuning');
  dir ??= defaultDir;
  const names = existsSync(dir) ? readdirSync(dir).filter((n) => n.endsWith('.json')).sort() : [];
  const found: { table: TuningTable; file: string }[] = [];
  for (const n of names) {
    let t: TuningTable;
    try {
      t = validateTuningTable(JSON.parse(readFileSync(join(dir, n), 'utf8')), Object.keys(SUBGROUP_TILES), Object.keys(ATTENTION_TILES));
    } catch {
      continue; // the engine's loader names a bad table when it starts; a plan just does not use it
    }
    if (!t.rates || t.adapter.vendor.toLowerCase() !== adapter.vendor.toLowerCase()) continue;
    if (adapter.architecture !== undefined && t.adapter.architecture.toLowerCase() !== adapter.architecture.toLowerCase()) continue;
    found.push({ table: t, file: dir === defaultDir ? join('tuning', n) : join(dir, n) });
  }
  if (found.length === 1) return found[0]!;
  if (found.length === 0) return { none: `no tuning table with measured rates for ${adapter.name} (scripts/gpu-run.sh's gemm step writes one: docs/performance.md "Next GPU run")` };
  return { none: `${found.length} tuning tables with rates match ${adapter.name} (${found.map((f) => f.file).join(', ')}) and its profile records no architecture to choose by` };
}
