import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import type { TaskKind } from '../catalog';
import { parseBytes } from '../common/bytes';
import { ComfyConfigError, comfyFoldersOf, type ComfyFolders } from '../weights/comfyui';
import { hubCacheDirOf } from '../weights/hub-cache';
import { kilnCacheDirOf, kilnCacheDirProblem } from '../weights/kiln-cache';
import { ClusterSettingsError, loadClusterSettings, loadWorkerProfiles, type ClusterSettings } from './cluster-settings';

/** Every setting the service reads, parsed and validated once at boot. Nothing else reads process.env
 * (the engine's own KILN_* switches aside, which src/engine/settings.ts reads, since the engine never imports Nest). */
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
  /** The Hugging Face hub cache, read in place where WEIGHTS_DIR lacks a checkpoint (never written): HF_HUB_CACHE,
   * else HUGGINGFACE_HUB_CACHE, HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub. */
  hubCacheDir: string;
  /** ComfyUI's model folders per kind, read in place where neither WEIGHTS_DIR nor the hub cache has a part:
   * COMFYUI_MODELS_DIR (a ComfyUI models/ folder) and COMFYUI_EXTRA_MODEL_PATHS (an extra_model_paths.yaml). */
  comfyFolders?: ComfyFolders;
  /** LORA_DIR: a folder of LoRA .safetensors files a request names by file name (src/loras/); ComfyUI's loras/
   * folders (comfyFolders.loras) are searched after it. Unset: none but ComfyUI's. */
  loraDir?: string;
  /** Tiny random checkpoints generated when real weights are absent (src/weights/demo.ts). Default DATA_DIR/demo-weights. */
  demoWeightsDir: string;
  /** KILN_CACHE_DIR: Kiln's own cache (the int8 profiles' quantised weights, src/weights/kiln-cache.ts), never inside
   * the hub cache or a ComfyUI folder. Default XDG_CACHE_HOME/kiln, else ~/.cache/kiln; `off`: undefined, no cache. */
  cacheDir?: string;
  /** DEMO_VIDEO: which demo checkpoint the video profiles run without real weights. Default trained. */
  demoVideo: DemoVideo;
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
  /** `local`: the API starts and supervises one GPU worker process. `none`: no GPU here; jobs wait. Default local. */
  workers: 'local' | 'none';
  /** QUEUE, REDIS_URL, STORAGE and the S3_* settings (docs/deploy.md). */
  cluster: ClusterSettings;
  /** Seconds a running task may take to stop after its DELETE before the worker is killed and restarted. Default 10. */
  interruptGraceS: number;
  /** Longest run of one task per kind, seconds (model load included): the worker is then killed and restarted and
   * the job fails `timed out after N s`. Default video 10800, image 3600, tts 1800. */
  maxJobS: Record<TaskKind, number>;
  /** Seconds without a heartbeat from the worker (a hung driver, a stuck native call) before it is killed and
   * restarted. Default 60. */
  workerStallS: number;
  /** Seconds a silent worker that keeps using the CPU (working, or starved) gets before it is killed. Default 10 x WORKER_STALL_S. */
  workerBusyS: number;
  /** WEBHOOK_SECRET (whsec_ + base64 of 24 to 64 bytes), decoded: callbacks are signed with it (Standard Webhooks). */
  webhookSecret: Buffer | undefined;
  /** Callback deliveries are retried until this many seconds after the job ended, then given up. Default 86400. */
  callbackMaxAgeS: number;
  /** Finished jobs (record, output, events) are deleted this many seconds after they end; 0 keeps them until deleted.
   * Default 0. */
  outputTtlS: number;
  /** GET /metrics without the token. Default false. */
  metricsPublic: boolean;
  /** Seconds between the comment lines that keep an event stream alive. Default 15. */
  sseHeartbeatS: number;
  /** CPU priority of the worker process (nice 0..19), so the API answers promptly while the worker's CPU-side work
   * (weight conversion, a software GPU) keeps every core busy. Default 10. */
  workerNice: number;
  /** GPU_MEMORY_BUDGET, checked here too so a bad value stops the API at boot, and handed to its local worker. */
  gpuMemoryBudgetBytes?: number;
}

/** What a GPU worker process reads (src/worker/main.ts): where weights and demo checkpoints are, its name, its logs. */
export interface WorkerSettings {
  dataDir: string;
  weightsDir: string;
  hubCacheDir: string;
  comfyFolders?: ComfyFolders;
  demoWeightsDir: string;
  cacheDir?: string;
  demoVideo: DemoVideo;
  logLevel: string;
  /** Shown in /api/health. Default <host name>-<pid>. */
  workerName: string;
  /** REDIS_URL set: take work from Redis (a GPU host), else from the API that started this worker (IPC). */
  cluster: ClusterSettings;
  /** WORKER_PROFILES: the profiles served; undefined: all this worker has weights for (real or demo). */
  workerProfiles?: string[];
  /** Seconds between heartbeats a worker may miss before the API counts it lost (WORKER_STALL_S). */
  stallS: number;
  /** GPU_MEMORY_BUDGET: GPU bytes this worker's engine may hold (bytes or with a unit: 16GiB, 24GB). WebGPU cannot ask
   * the driver: undefined keeps the engine's default (half the RAM on a software adapter, else 64 GiB). Shown in
   * /api/health (gpu.memory.budgetBytes); npm run plan reads it too. */
  gpuMemoryBudgetBytes?: number;
  /** PREVIEWS: live previews while a job samples (default on; off gives every cycle to sampling). */
  previews: boolean;
}

/** The video profiles' demo checkpoint: `trained`, the one committed under assets/demo/minimax-h3 (it draws the demo
 * grammar; a 1 s 352p job takes minutes on a software GPU), or `random`, a tiny random one of the same layout (noise,
 * seconds a job: for checking the plumbing). Without a committed trained checkpoint both mean random. */
export type DemoVideo = 'trained' | 'random';

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

function logLevelOf(env: Env): string {
  const level = (env.LOG_LEVEL ?? 'info').trim().toLowerCase();
  if (!LEVELS.includes(level)) throw new SettingsError(`LOG_LEVEL=${JSON.stringify(env.LOG_LEVEL)}: expected one of ${LEVELS.join(', ')}`);
  return level;
}

function demoVideoOf(env: Env): DemoVideo {
  const v = (env.DEMO_VIDEO ?? '').trim().toLowerCase() || 'trained';
  if (v !== 'trained' && v !== 'random') {
    throw new SettingsError(`DEMO_VIDEO=${JSON.stringify(env.DEMO_VIDEO)}: expected trained (the demo checkpoint that draws the demo grammar) or random (noise, fast: for checking the plumbing)`);
  }
  return v;
}

function dirsOf(env: Env): Pick<Settings, 'dataDir' | 'weightsDir' | 'hubCacheDir' | 'comfyFolders' | 'demoWeightsDir' | 'cacheDir'> {
  const dataDir = resolve(env.DATA_DIR?.trim() || './data');
  let comfyFolders: ComfyFolders | undefined;
  try {
    comfyFolders = comfyFoldersOf(env);
  } catch (err) {
    if (err instanceof ComfyConfigError) throw new SettingsError(err.message);
    throw err;
  }
  const hubCacheDir = resolve(hubCacheDirOf(env));
  const cacheDir = kilnCacheDirOf(env);
  const readOnly = [{ label: 'the Hugging Face cache', dir: hubCacheDir }, ...Object.values(comfyFolders ?? {}).flat().map((dir) => ({ label: 'the ComfyUI folder', dir }))];
  const problem = cacheDir ? kilnCacheDirProblem(cacheDir, readOnly) : undefined;
  if (problem) throw new SettingsError(problem);
  return {
    dataDir,
    weightsDir: resolve(env.WEIGHTS_DIR?.trim() || './weights'),
    hubCacheDir,
    ...(comfyFolders ? { comfyFolders } : {}),
    demoWeightsDir: resolve(env.DEMO_WEIGHTS_DIR?.trim() || join(dataDir, 'demo-weights')),
    ...(cacheDir ? { cacheDir } : {}),
  };
}

function cluster(env: Env): ClusterSettings {
  try {
    return loadClusterSettings(env);
  } catch (err) {
    if (err instanceof ClusterSettingsError) throw new SettingsError(err.message);
    throw err;
  }
}

/** Standard Webhooks secrets: `whsec_` and the base64 of 24 to 64 random bytes. */
function webhookSecret(raw: string | undefined): Buffer | undefined {
  const v = raw?.trim();
  if (!v) return undefined;
  const b64 = v.startsWith('whsec_') ? v.slice(6) : '';
  const key = Buffer.from(b64, 'base64');
  if (!b64 || !/^[A-Za-z0-9+/]+={0,2}$/.test(b64) || key.length < 24 || key.length > 64) {
    throw new SettingsError('WEBHOOK_SECRET: expected whsec_ followed by the base64 of 24 to 64 random bytes (e.g. whsec_$(openssl rand -base64 32))');
  }
  return key;
}

export const DEFAULT_MAX_JOB_S: Readonly<Record<TaskKind, number>> = { video: 10_800, image: 3_600, tts: 1_800 };

/** MAX_JOB_S: one number for every kind, or `video=7200,image=900,tts=600` (kinds left out keep their default). */
function maxJobS(env: Env): Record<TaskKind, number> {
  const raw = env.MAX_JOB_S?.trim();
  const out = { ...DEFAULT_MAX_JOB_S };
  if (!raw) return out;
  const bad = () => new SettingsError(`MAX_JOB_S=${JSON.stringify(raw)}: expected whole seconds from 1 to 604800, for every kind (3600) or per kind (video=7200,image=900,tts=600)`);
  const seconds = (v: string) => {
    if (!/^\d+$/.test(v.trim()) || Number(v) < 1 || Number(v) > 604_800) throw bad();
    return Number(v);
  };
  if (!raw.includes('=')) {
    const v = seconds(raw);
    return { video: v, image: v, tts: v };
  }
  for (const part of raw.split(',')) {
    const [kind, v, more] = part.split('=');
    if (more !== undefined || v === undefined || !(kind.trim() in out)) throw bad();
    out[kind.trim() as TaskKind] = seconds(v);
  }
  return out;
}

/** Reads and validates the settings; a bad value throws SettingsError naming the variable. */
export function loadSettings(env: Env = process.env): Settings {
  const token = env.API_TOKEN;
  if (token !== undefined && token !== '' && (token.length < 8 || /\s/.test(token))) {
    throw new SettingsError('API_TOKEN: must be at least 8 characters with no spaces (or unset to generate one)');
  }
  const host = (env.HOST ?? '127.0.0.1').trim();
  if (host === '') throw new SettingsError('HOST: must not be empty');
  const workers = (env.WORKERS ?? 'local').trim().toLowerCase();
  if (workers !== 'local' && workers !== 'none') throw new SettingsError(`WORKERS=${JSON.stringify(env.WORKERS)}: expected local (start a GPU worker here) or none (no GPU on this host)`);
  const stallS = int(env, 'WORKER_STALL_S', 60, 2, 3600);
  return {
    port: int(env, 'PORT', 8000, 0, 65535),
    host,
    apiToken: token === '' ? undefined : token,
    ...dirsOf(env),
    ...(env.LORA_DIR?.trim() ? { loraDir: resolve(env.LORA_DIR.trim()) } : {}),
    demoVideo: demoVideoOf(env),
    allowPrivateUrls: bool(env, 'ALLOW_PRIVATE_URLS', false),
    logLevel: logLevelOf(env),
    maxQueue: int(env, 'MAX_QUEUE', 1000, 1, 1_000_000),
    maxBodyMb: int(env, 'MAX_BODY_MB', 360, 1, 4096),
    fetchTimeoutS: int(env, 'FETCH_TIMEOUT_S', 30, 1, 3600),
    workers,
    cluster: cluster(env),
    interruptGraceS: int(env, 'INTERRUPT_GRACE_S', 10, 1, 3600),
    maxJobS: maxJobS(env),
    workerStallS: stallS,
    workerBusyS: int(env, 'WORKER_BUSY_S', 10 * stallS, 2, 86_400),
    workerNice: int(env, 'WORKER_NICE', 10, 0, 19),
    ...(gpuMemoryBudgetOf(env) !== undefined ? { gpuMemoryBudgetBytes: gpuMemoryBudgetOf(env) } : {}),
    sseHeartbeatS: int(env, 'SSE_HEARTBEAT_S', 15, 1, 300),
    outputTtlS: int(env, 'OUTPUT_TTL_S', 0, 0, 10 * 365 * 86_400),
    metricsPublic: bool(env, 'METRICS_PUBLIC', false),
    webhookSecret: webhookSecret(env.WEBHOOK_SECRET),
    callbackMaxAgeS: int(env, 'CALLBACK_MAX_AGE_S', 86_400, 1, 30 * 86_400),
  };
}

/** The GPU worker's settings, validated like the API's. */
export function loadWorkerSettings(env: Env = process.env): WorkerSettings {
  const name = env.WORKER_NAME?.trim() || `${hostname()}-${process.pid}`;
  if (!/^[\w.@:-]{1,100}$/.test(name)) throw new SettingsError(`WORKER_NAME=${JSON.stringify(env.WORKER_NAME)}: use 1 to 100 letters, digits and . _ - @ :`);
  let profiles: string[] | undefined;
  try {
    profiles = loadWorkerProfiles(env);
  } catch (err) {
    throw new SettingsError((err as Error).message);
  }
  const budget = gpuMemoryBudgetOf(env);
  return {
    ...dirsOf(env), demoVideo: demoVideoOf(env), logLevel: logLevelOf(env), workerName: name, cluster: cluster(env), workerProfiles: profiles,
    stallS: int(env, 'WORKER_STALL_S', 60, 2, 3600), previews: bool(env, 'PREVIEWS', true), ...(budget !== undefined ? { gpuMemoryBudgetBytes: budget } : {}),
  };
}

/** GPU_MEMORY_BUDGET in bytes, or undefined when unset (the engine's default). */
function gpuMemoryBudgetOf(env: Env): number | undefined {
  if (!env.GPU_MEMORY_BUDGET?.trim()) return undefined;
  let budget: number;
  try {
    budget = parseBytes(env.GPU_MEMORY_BUDGET, 'GPU_MEMORY_BUDGET');
  } catch (err) {
    throw new SettingsError((err as Error).message);
  }
  if (budget < 2 ** 28) throw new SettingsError(`GPU_MEMORY_BUDGET=${env.GPU_MEMORY_BUDGET}: at least 256MiB`);
  return budget;
}

/** Nest injection token for the Settings object. */
export const SETTINGS = Symbol('SETTINGS');
