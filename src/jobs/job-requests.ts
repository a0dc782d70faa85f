// The spec's semantic rules every create request shares (HTTP 400 with a reason a user can act on): the prompt, seed,
// steps, priority, wait timeout, language and transcript. Each kind's own rules are its feature folder's drafting
// (video/video.draft.ts, image/image.draft.ts), which calls these. Types were already checked (422) by the DTO layer;
// here values are checked and defaults resolved, once: where a request becomes a job. Pure: no I/O.
import { randomInt } from 'node:crypto';
import { BadInputError } from '../common/errors';
import { DEFAULT_PRIORITY, MAX_PRIORITY, MAX_PROMPT_CHARS, MAX_REF_TEXT_CHARS, MAX_SEED, MAX_STEPS, MAX_WAIT_S, TTS_DEFAULTS, TTS_LANGUAGES, type LoraCapabilities, type LoraChoice, type ProfileInfo } from '../catalog';

export function oneOf(field: string, value: string, allowed: readonly string[], what = field): string {
  if (!allowed.includes(value)) throw new BadInputError(`unknown ${what} ${JSON.stringify(value)}; use one of: ${allowed.join(', ')}`);
  return value;
}

export function checkPrompt(prompt: string | undefined, field = 'prompt'): string {
  if (prompt === undefined || prompt.trim() === '') throw new BadInputError(`${field} is empty; say what to make`);
  if (prompt.length > MAX_PROMPT_CHARS) throw new BadInputError(`${field} is ${prompt.length} characters long; the limit is ${MAX_PROMPT_CHARS}`);
  return prompt;
}

/** Checks the prompt, then the rest: a blank prompt does not hide a problem elsewhere. Both reasons come in one 400,
 * a line each (the page flags each field at once). */
export function promptAnd<T>(check: () => string, rest: (prompt: string) => T): T {
  let prompt = '';
  let problem: BadInputError | undefined;
  try {
    prompt = check();
  } catch (err) {
    if (!(err instanceof BadInputError)) throw err;
    problem = err;
  }
  let out: T;
  try {
    out = rest(prompt);
  } catch (err) {
    if (problem && err instanceof BadInputError) throw new BadInputError(`${problem.message}\n${err.message}`);
    throw err;
  }
  if (problem) throw problem;
  return out;
}

/** A reference clip's transcript (ref_text, tts_ref_text): optional, and bounded like the prompt. */
export function checkRefText(text: string | undefined, field: string): string {
  const t = text ?? TTS_DEFAULTS.ref_text;
  if (t.length > MAX_REF_TEXT_CHARS) throw new BadInputError(`${field} is ${t.length} characters long; the limit is ${MAX_REF_TEXT_CHARS} (the transcript of a reference clip of at most 30 s)`);
  return t;
}

export function resolveSeed(seed: number | undefined): number {
  if (seed === undefined || seed === -1) return randomInt(0, 2 ** 31);
  if (!Number.isInteger(seed) || seed < 0 || seed > MAX_SEED) throw new BadInputError(`seed must be -1 (random) or a whole number from 0 to ${MAX_SEED} (got ${seed})`);
  return seed;
}

export function resolveSteps(steps: number | undefined, profile: ProfileInfo): number {
  if (steps === undefined || steps === 0) return profile.default_steps;
  if (!Number.isInteger(steps) || steps < 1 || steps > MAX_STEPS) throw new BadInputError(`steps must be 0 (profile default, ${profile.default_steps}) or from 1 to ${MAX_STEPS} (got ${steps})`);
  return steps;
}

export function resolvePriority(priority: number | undefined): number {
  if (priority === undefined) return DEFAULT_PRIORITY;
  if (!Number.isInteger(priority) || priority < 0 || priority > MAX_PRIORITY) throw new BadInputError(`priority must be a whole number from 0 to ${MAX_PRIORITY} (got ${priority}); higher runs first, ${DEFAULT_PRIORITY} by default`);
  return priority;
}

export function checkTimeout(timeout: number | undefined, def: number): number {
  if (timeout === undefined) return def;
  if (!Number.isInteger(timeout) || timeout < 0 || timeout > MAX_WAIT_S) throw new BadInputError(`timeout must be a whole number of seconds from 0 to ${MAX_WAIT_S} (got ${timeout})`);
  return timeout;
}

export function checkLanguage(language: string | undefined, field: string): string {
  return oneOf(field, language ?? TTS_DEFAULTS.language, TTS_LANGUAGES, field);
}

/**
 * The request's `loras` (a JSON array, or its JSON text from a multipart form) checked against the profile's LoRA
 * capabilities: each `{ name, scale? }` (scale defaults to 1) within the table's count and scale range. Whether each
 * name is a file that fits the profile's model is the LoRA library's check (src/loras/), which reads the files.
 */
export function resolveLoras(raw: unknown, caps: LoraCapabilities, profile: string): LoraChoice[] {
  let v = raw;
  if (v === undefined || v === null || v === '') return [];
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v);
    } catch {
      throw new BadInputError('loras: expected a JSON array of {"name": ..., "scale": ...} (got text that is not JSON)');
    }
  }
  if (!Array.isArray(v)) throw new BadInputError('loras: expected an array of {"name": ..., "scale": ...}');
  if (v.length === 0) return [];
  if (caps.unsupported) throw new BadInputError(`loras: ${caps.unsupported}`);
  if (v.length > caps.max) throw new BadInputError(`loras: ${v.length} given, profile ${profile} takes at most ${caps.max} at once`);
  const { min, max, default: def } = caps.scale;
  const seen = new Set<string>();
  return v.map((item: unknown, i) => {
    const o = item as Record<string, unknown>;
    if (!o || typeof o !== 'object' || Array.isArray(o)) throw new BadInputError(`loras[${i}]: expected {"name": ..., "scale": ...}`);
    const extra = Object.keys(o).filter((k) => k !== 'name' && k !== 'scale');
    if (extra.length) throw new BadInputError(`loras[${i}]: unknown field${extra.length > 1 ? 's' : ''} ${extra.join(', ')}; a LoRA is {"name": ..., "scale": ...}`);
    if (typeof o.name !== 'string' || o.name.trim() === '') throw new BadInputError(`loras[${i}].name: the LoRA's file name (without .safetensors), as /api/config lists it`);
    const name = o.name.trim().replace(/\.safetensors$/, '');
    if (seen.has(name)) throw new BadInputError(`loras[${i}]: ${name} is named twice; give it once, with the sum of the scales`);
    seen.add(name);
    const scale = o.scale === undefined ? def : o.scale;
    if (typeof scale !== 'number' || !Number.isFinite(scale) || scale < min || scale > max) {
      throw new BadInputError(`loras[${i}].scale: ${JSON.stringify(o.scale)} is outside ${min} to ${max} (1 is the LoRA as trained, 0 turns it off)`);
    }
    return { name, scale };
  });
}
