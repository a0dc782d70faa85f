// A pipeline RunContext for model tests: records the stages and progress a job reports into the caller's arrays.
import type { Stage } from '../../src/catalog';
import type { RunContext } from '../../src/models/common/pipeline';

export interface RecordingOptions {
  signal?: AbortSignal;
  stages?: Stage[];
  progress?: [number, number][];
  /** Called after each progress report (e.g. to abort mid-run). */
  onProgress?: () => void;
  /** Record a stage only when it differs from the last one recorded (a stage set again is one entry). */
  distinct?: boolean;
}

export const recordingContext = (o: RecordingOptions = {}): RunContext => ({
  signal: o.signal ?? new AbortController().signal,
  stage: (s) => (!o.distinct || o.stages?.at(-1) !== s) && o.stages?.push(s),
  progress: (v, m) => {
    o.progress?.push([v, m]);
    o.onProgress?.();
  },
  safePoint: async () => {},
});
