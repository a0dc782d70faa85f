// Measured rates that turn a plan's FLOPs into seconds: only figures a real run gave (docs/performance.md), per
// adapter and profile. A plan for an adapter or profile without one says so and predicts nothing.

export interface Calibration {
  /** Sustained FLOP/s of the sampling stage's work. */
  flopsPerSecond: number;
  /** Where the figure comes from. */
  basis: string;
}

const KREA2_H200: Calibration = {
  flopsPerSecond: 113.2e12 / 8.19,
  basis: 'H200, 2026-11-28: a Krea 2 1K DiT step, 113.2 TFLOP in 8.19 s (register-tiled GEMM, the default path; docs/performance.md "First GPU run")',
};

const TABLE: Record<string, Record<string, Calibration>> = {
  h200: { imgart_turbo: KREA2_H200 },
};

export function calibrationFor(adapter: string, profile: string): Calibration | undefined {
  return TABLE[adapter]?.[profile];
}
