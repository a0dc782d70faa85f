// A pipeline RunContext for model tests: records the stages and progress a job reports into the caller's arrays.
import type { Stage } from '../../src/catalog';
import type { RunContext } from '../../src/models/common/pipeline';

export interface RecordingOptions {
  signal?: AbortSignal;
  stages?: Stage[];
  progress?: [number, number][];
  /** Called after each progress report (e.g. to abort mid-run). */
  onProgress?: () => void;
}

export const recordingContext = (o: RecordingOptions = {}): RunContext => ({
  signal: o.signal ?? new AbortController().signal,
  stage: (s) => o.stages?.push(s),
  progress: (v, m) => {
    o.progress?.push([v, m]);
    o.onProgress?.();
  },
  safePoint: async () => {},
});
