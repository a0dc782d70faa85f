// Flow-matching Euler sampling schedule of Qwen-Image-2.1: diffusers FlowMatchEulerDiscreteScheduler with the
// checkpoint's scheduler/scheduler_config.json (reported: use_dynamic_shifting, exponential time shift,
// base_image_seq_len 256, max_image_seq_len 8192, base_shift 0.5, max_shift 0.9, shift_terminal 0.02), driven as
// pipeline_qwenimage21.py drives it:
//   sigmas0 = linspace(1, 1/N, N)                                     (float64, then float32)
//   mu      = base_shift + (seq - base_seq) * (max_shift - base_shift) / (max_seq - base_seq)   (float64; seq = target
//             latent tokens, (H/16) * (W/16); extrapolated past max_seq)
//   sigma   = e^mu / (e^mu + (1/sigma0 - 1))                          (exponential shift, exponent 1)
//   sigma   = 1 - (1 - sigma) / ((1 - sigma[N-1]) / (1 - shift_terminal))   (the last one lands on shift_terminal)
//   sigmas  = [..., 0]; timesteps = sigmas * 1000; the transformer gets timestep / 1000
//   step    x <- x + (sigma[i+1] - sigma[i]) * v
// Every step after the float64 ones is rounded to float32 as numpy/torch do, so sigmas match bit for bit or
// within an ulp.

export interface FlowMatchConfig {
  numTrainTimesteps: number;
  shift: number;
  useDynamicShifting: boolean;
  baseShift: number;
  maxShift: number;
  baseImageSeqLen: number;
  maxImageSeqLen: number;
  shiftTerminal: number | null;
  timeShiftType: 'exponential' | 'linear';
  invertSigmas: boolean;
}

export class FlowMatchConfigError extends Error {
  override readonly name = 'FlowMatchConfigError';
}

/** The reported scheduler_config.json of Qwen/Qwen-Image-2.1 (shared/upstream/README.md). */
export const QWEN_IMAGE21_SCHEDULER = {
  _class_name: 'FlowMatchEulerDiscreteScheduler',
  num_train_timesteps: 1000,
  shift: 1.0,
  use_dynamic_shifting: true,
  base_shift: 0.5,
  max_shift: 0.9,
  base_image_seq_len: 256,
  max_image_seq_len: 8192,
  invert_sigmas: false,
  shift_terminal: 0.02,
  use_karras_sigmas: false,
  use_exponential_sigmas: false,
  use_beta_sigmas: false,
  time_shift_type: 'exponential',
  stochastic_sampling: false,
} as const;

/** Class defaults of FlowMatchEulerDiscreteScheduler (for keys a config file leaves out). */
const DEFAULTS: Record<string, unknown> = {
  num_train_timesteps: 1000,
  shift: 1.0,
  use_dynamic_shifting: false,
  base_shift: 0.5,
  max_shift: 1.15,
  base_image_seq_len: 256,
  max_image_seq_len: 4096,
  invert_sigmas: false,
  shift_terminal: null,
  use_karras_sigmas: false,
  use_exponential_sigmas: false,
  use_beta_sigmas: false,
  time_shift_type: 'exponential',
  stochastic_sampling: false,
};

export function parseFlowMatchConfig(json: unknown, source = 'scheduler/scheduler_config.json'): FlowMatchConfig {
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw new FlowMatchConfigError(`${source}: not a JSON object`);
  const c = json as Record<string, unknown>;
  if (c._class_name !== undefined && c._class_name !== 'FlowMatchEulerDiscreteScheduler') {
    throw new FlowMatchConfigError(`${source}: _class_name ${JSON.stringify(c._class_name)} is not FlowMatchEulerDiscreteScheduler`);
  }
  const get = (k: string): unknown => (c[k] === undefined ? DEFAULTS[k] : c[k]);
  const num = (k: string): number => {
    const v = get(k);
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new FlowMatchConfigError(`${source}: ${k} = ${JSON.stringify(v)} must be a number`);
    return v;
  };
  for (const k of ['use_karras_sigmas', 'use_exponential_sigmas', 'use_beta_sigmas', 'stochastic_sampling']) {
    if (get(k) === true) throw new FlowMatchConfigError(`${source}: ${k} is not supported (Qwen-Image-2.1 does not use it)`);
  }
  const type = get('time_shift_type');
  if (type !== 'exponential' && type !== 'linear') throw new FlowMatchConfigError(`${source}: time_shift_type ${JSON.stringify(type)}`);
  const terminal = get('shift_terminal');
  if (terminal !== null && (typeof terminal !== 'number' || !(terminal >= 0 && terminal < 1))) {
    throw new FlowMatchConfigError(`${source}: shift_terminal ${JSON.stringify(terminal)} must be null or in [0, 1)`);
  }
  const cfg: FlowMatchConfig = {
    numTrainTimesteps: num('num_train_timesteps'),
    shift: num('shift'),
    useDynamicShifting: get('use_dynamic_shifting') === true,
    baseShift: num('base_shift'),
    maxShift: num('max_shift'),
    baseImageSeqLen: num('base_image_seq_len'),
    maxImageSeqLen: num('max_image_seq_len'),
    // 0 is falsy upstream: no stretch
    shiftTerminal: terminal === 0 ? null : (terminal as number | null),
    timeShiftType: type,
    invertSigmas: get('invert_sigmas') === true,
  };
  if (cfg.maxImageSeqLen === cfg.baseImageSeqLen) throw new FlowMatchConfigError(`${source}: max_image_seq_len equals base_image_seq_len`);
  return cfg;
}

export interface Schedule {
  /** N + 1 sigmas, the last 0. */
  sigmas: Float32Array;
  /** N timesteps = sigmas * num_train_timesteps (f32). */
  timesteps: Float32Array;
  /** The shift used (null without dynamic shifting). */
  mu: number | null;
}

const f = Math.fround;

/** The pipeline's calculate_shift: mu for a target of `imageSeqLen` latent tokens (float64). */
export function calculateShift(cfg: FlowMatchConfig, imageSeqLen: number): number {
  const m = (cfg.maxShift - cfg.baseShift) / (cfg.maxImageSeqLen - cfg.baseImageSeqLen);
  const b = cfg.baseShift - m * cfg.baseImageSeqLen;
  return imageSeqLen * m + b;
}

/** Latent tokens of a target image of width x height pixels (VAE 16x, no patching; sizes are multiples of 32). */
export function imageSeqLen(width: number, height: number): number {
  return Math.floor(height / 16) * Math.floor(width / 16);
}

/** Sigmas and timesteps for `steps` steps on a target of `seqLen` latent tokens. */
export function flowMatchSchedule(cfg: FlowMatchConfig, steps: number, seqLen: number): Schedule {
  if (!Number.isInteger(steps) || steps < 2) throw new RangeError(`flowMatchSchedule: ${steps} steps (at least 2: one step stretches to a 0/0 upstream)`);
  // np.linspace(1.0, 1/N, N) in float64, then astype(float32)
  const lo = 1 / steps;
  const step = (lo - 1) / (steps - 1);
  let s = Array.from({ length: steps }, (_, i) => f(i === steps - 1 ? lo : 1 + i * step));
  let mu: number | null = null;
  if (cfg.useDynamicShifting) {
    mu = calculateShift(cfg, seqLen);
    const em = f(Math.exp(mu));
    s = s.map((t) => (cfg.timeShiftType === 'exponential' ? f(em / f(em + f(f(1 / t) - 1))) : f(mu! / f(mu! + f(f(1 / t) - 1)))));
  } else {
    const k = f(cfg.shift);
    s = s.map((t) => f(f(k * t) / f(1 + f(f(k - 1) * t))));
  }
  if (cfg.shiftTerminal) {
    const oneMinus = s.map((t) => f(1 - t));
    const scale = f(oneMinus[steps - 1]! / f(1 - cfg.shiftTerminal));
    s = oneMinus.map((z) => f(1 - f(z / scale)));
  }
  if (cfg.invertSigmas) throw new RangeError('flowMatchSchedule: invert_sigmas is not supported');
  const sigmas = Float32Array.from([...s, 0]);
  const timesteps = Float32Array.from(s, (t) => f(t * cfg.numTrainTimesteps));
  return { sigmas, timesteps, mu };
}

/** The value the pipeline hands the transformer at step i: timestep / 1000 in f32. */
export function modelTimestep(schedule: Schedule, i: number): number {
  const t = schedule.timesteps[i];
  if (t === undefined) throw new RangeError(`modelTimestep: step ${i} of ${schedule.timesteps.length}`);
  return f(t / 1000);
}

/** dt of step i (sigma[i+1] - sigma[i], f32). */
export function eulerDt(schedule: Schedule, i: number): number {
  if (!(i >= 0 && i < schedule.timesteps.length)) throw new RangeError(`eulerDt: step ${i} of ${schedule.timesteps.length}`);
  return f(schedule.sigmas[i + 1]! - schedule.sigmas[i]!);
}
