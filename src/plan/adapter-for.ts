// The adapter profile a dry run's plan stands for (src/plan/child.ts), from what the GPU worker reported.
import { ADAPTERS, type AdapterProfile } from '../engine/plan-device';

/** The adapter profile a plan stands for: the one the worker reported where a profile of it is recorded (a software
 * adapter is this box's lavapipe; a known name), else the H200's, said so in a note. */
export function adapterFor(gpu: Record<string, unknown> | undefined): { adapter: AdapterProfile; note?: string } {
  const assumed = ADAPTERS.h200!;
  if (!gpu || gpu.available !== true) {
    const why = typeof gpu?.error === 'string' ? gpu.error : 'the GPU worker has not reported its adapter';
    return { adapter: assumed, note: `adapter profile assumed: ${assumed.name} (${why})` };
  }
  const name = String(gpu.name ?? '');
  if (gpu.software === true) {
    const lavapipe = ADAPTERS.lavapipe!;
    return /llvmpipe/i.test(name) ? { adapter: lavapipe } : { adapter: lavapipe, note: `adapter profile assumed: ${lavapipe.name} (the worker's software adapter, ${JSON.stringify(name)}, has no recorded profile of its own)` };
  }
  const known = Object.values(ADAPTERS).find((a) => !a.software && name.toLowerCase().includes(a.name.toLowerCase().replace(/^nvidia /, '')));
  if (known) return { adapter: known };
  return { adapter: assumed, note: `adapter profile assumed: ${assumed.name} (the worker's adapter, ${JSON.stringify(name)}, has no recorded profile: src/engine/plan-device.ts ADAPTERS)` };
}
