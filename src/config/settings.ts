import { join, resolve } from 'node:path';

/** Every setting the service reads, parsed and validated once at boot. Nothing else reads process.env
 * (the engine's own KILN_* switches aside, which it reads for itself since it never imports Nest). */
export interface Settings {
  /** TCP port. Default 8000. */
  port: number;
  /** Interface to listen on. Default 127.0.0.1 (loopback only; set 0.0.0.0 to serve the network). */
  host: string;
  /** Shared secret for /api/*. When unset, one is generated on first start and kept in DATA_DIR/token. */
  apiToken: string | undefined;
  /** Job database, inputs and outputs. Default ./data. */
  dataDir: string;
  /** Model checkpoints, one folder per profile (see weights/). Default ./weights. */
  weightsDir: string;
  /** Tiny random checkpoints generated when real weights are absent (src/weights/demo.ts). Default DATA_DIR/demo-weights. */
  demoWeightsDir: string;
  /** Let input URLs and callbacks reach loopback/private/link-local addresses. Default false. */
  allowPrivateUrls: boolean;
  /** pino level: fatal, error, warn, info, debug, trace, silent. Default info. */
  logLevel: string;
  /** Most jobs that may wait in the queue; the next create gets 429. Default 1000. */
  maxQueue: number;
  /** Largest JSON request body in MiB (base64 images travel inside it). Default 360. */
  maxBodyMb: number;
  /** Seconds an input URL download may take. Default 30. */
  fetchTimeoutS: number;
}

export class SettingsError extends Error {
  override readonly name = 'SettingsError';
}

type Env = Record<string, string | undefined>;

function int(env: Env, key: string, def: number, min: number, max: number): number {
  const raw = env[key];
  if (raw === undefined || raw === '') return def;
  if (!/^\d+$/.test(raw.trim())) throw new SettingsError(`${key}=${JSON.stringify(raw)}: expected a whole number from ${min} to ${max}`);
  const v = Number(raw);
  if (v < min || v > max) throw new SettingsError(`${key}=${raw}: expected a whole number from ${min} to ${max}`);
  return v;
}

function bool(env: Env, key: string, def: boolean): boolean {
  const raw = env[key]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return def;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new SettingsError(`${key}=${JSON.stringify(env[key])}: expected 1/0, true/false, yes/no or on/off`);
}

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Reads and validates the settings; a bad value throws SettingsError naming the variable. */
export function loadSettings(env: Env = process.env): Settings {
  const token = env.API_TOKEN;
  if (token !== undefined && token !== '' && (token.length < 8 || /\s/.test(token))) {
    throw new SettingsError('API_TOKEN: must be at least 8 characters with no spaces (or unset to generate one)');
  }
  const logLevel = (env.LOG_LEVEL ?? 'info').trim().toLowerCase();
  if (!LEVELS.includes(logLevel)) throw new SettingsError(`LOG_LEVEL=${JSON.stringify(env.LOG_LEVEL)}: expected one of ${LEVELS.join(', ')}`);
  const host = (env.HOST ?? '127.0.0.1').trim();
  if (host === '') throw new SettingsError('HOST: must not be empty');
  const dataDir = resolve(env.DATA_DIR?.trim() || './data');
  return {
    port: int(env, 'PORT', 8000, 0, 65535),
    host,
    apiToken: token === '' ? undefined : token,
    dataDir,
    weightsDir: resolve(env.WEIGHTS_DIR?.trim() || './weights'),
    demoWeightsDir: resolve(env.DEMO_WEIGHTS_DIR?.trim() || join(dataDir, 'demo-weights')),
    allowPrivateUrls: bool(env, 'ALLOW_PRIVATE_URLS', false),
    logLevel,
    maxQueue: int(env, 'MAX_QUEUE', 1000, 1, 1_000_000),
    maxBodyMb: int(env, 'MAX_BODY_MB', 360, 1, 4096),
    fetchTimeoutS: int(env, 'FETCH_TIMEOUT_S', 30, 1, 3600),
  };
}

/** Nest injection token for the Settings object. */
export const SETTINGS = Symbol('SETTINGS');
