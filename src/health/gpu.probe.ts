/** The GPU section of /api/health. Separate from the engine so tests and machines without a GPU stack can
 * provide their own; the default (app.module) describes the process's shared engine. */
export abstract class GpuProbe {
  abstract describe(): Promise<Record<string, unknown>>;
}

/** Describes whatever `get()` builds; a failure to get an adapter is reported, not thrown. */
export class EngineGpuProbe extends GpuProbe {
  constructor(private readonly get: () => Promise<{ describe(): object }>) {
    super();
  }

  async describe(): Promise<Record<string, unknown>> {
    try {
      const engine = await this.get();
      return { available: true, ...(engine.describe() as Record<string, unknown>) };
    } catch (err) {
      return { available: false, error: err instanceof Error ? err.message : String(err) };
    }
  }
}
