// The GPU worker's settings, on the API side (WORKERS, INTERRUPT_GRACE_S, MAX_JOB_S, WORKER_STALL_S, WORKER_NICE, DEMO_VIDEO)
// and in the worker (loadWorkerSettings): defaults, the accepted forms, and a bad value naming the variable.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_MAX_JOB_S, loadSettings, loadWorkerSettings, SettingsError } from '../../src/config/settings';

const refused = (env: Record<string, string>, name: string) =>
  assert.throws(() => loadSettings(env), (e: Error) => e instanceof SettingsError && e.message.startsWith(name), `${JSON.stringify(env)} is refused naming ${name}`);

test('worker settings: defaults', () => {
  const s = loadSettings({});
  assert.deepEqual([s.workers, s.interruptGraceS, s.workerStallS, s.workerBusyS, s.workerNice], ['local', 10, 60, 600, 10]);
  assert.deepEqual(s.maxJobS, { video: 10_800, image: 3_600, tts: 1_800 });
  assert.deepEqual(s.maxJobS, DEFAULT_MAX_JOB_S);
});

test('MAX_JOB_S: one number for every kind, or per kind with the rest left at their defaults', () => {
  assert.deepEqual(loadSettings({ MAX_JOB_S: '600' }).maxJobS, { video: 600, image: 600, tts: 600 });
  assert.deepEqual(loadSettings({ MAX_JOB_S: 'image=900, tts=60' }).maxJobS, { video: 10_800, image: 900, tts: 60 });
  for (const bad of ['0', '-5', '1.5', 'audio=60', 'image=', 'image=60=2', 'image=ten', '604801']) refused({ MAX_JOB_S: bad }, 'MAX_JOB_S=');
});

test('WORKERS, INTERRUPT_GRACE_S, WORKER_STALL_S, WORKER_NICE: ranges and names', () => {
  assert.equal(loadSettings({ WORKERS: 'None' }).workers, 'none');
  refused({ WORKERS: 'remote' }, 'WORKERS=');
  refused({ INTERRUPT_GRACE_S: '0' }, 'INTERRUPT_GRACE_S=');
  refused({ WORKER_STALL_S: '1' }, 'WORKER_STALL_S=');
  refused({ WORKER_NICE: '20' }, 'WORKER_NICE=');
  assert.equal(loadSettings({ WORKER_NICE: '0' }).workerNice, 0);
});

test('WORKER_BUSY_S: 10 x WORKER_STALL_S unless set', () => {
  assert.equal(loadSettings({ WORKER_STALL_S: '30' }).workerBusyS, 300);
  assert.equal(loadSettings({ WORKER_STALL_S: '30', WORKER_BUSY_S: '45' }).workerBusyS, 45);
  refused({ WORKER_BUSY_S: '1' }, 'WORKER_BUSY_S=');
});

test('the worker reads the directories and log level as the API does, and its name', () => {
  const env = { DATA_DIR: '/d', WEIGHTS_DIR: '/w', LOG_LEVEL: 'warn', WORKER_NAME: 'gpu-box-1' };
  const w = loadWorkerSettings(env);
  const api = loadSettings(env);
  assert.deepEqual([w.dataDir, w.weightsDir, w.demoWeightsDir, w.logLevel], [api.dataDir, api.weightsDir, api.demoWeightsDir, api.logLevel]);
  assert.equal(w.workerName, 'gpu-box-1');
  assert.match(loadWorkerSettings({}).workerName, new RegExp(`-${process.pid}$`));
  assert.throws(() => loadWorkerSettings({ WORKER_NAME: 'a b' }), /^Error: WORKER_NAME=|WORKER_NAME=/);
  assert.equal(loadWorkerSettings({}).gpuMemoryBudgetBytes, undefined, 'GPU_MEMORY_BUDGET unset: the engine\'s default');
  assert.equal(loadWorkerSettings({ GPU_MEMORY_BUDGET: '16GiB' }).gpuMemoryBudgetBytes, 16 * 2 ** 30);
  assert.deepEqual([loadWorkerSettings({}).previews, loadWorkerSettings({ PREVIEWS: 'false' }).previews, loadWorkerSettings({ PREVIEWS: 'on' }).previews], [true, false, true], 'PREVIEWS');
  assert.throws(() => loadWorkerSettings({ PREVIEWS: 'sometimes' }), /PREVIEWS="sometimes": expected 1\/0/);
  assert.equal(loadWorkerSettings({ GPU_MEMORY_BUDGET: '24 GB' }).gpuMemoryBudgetBytes, 24e9);
  assert.throws(() => loadWorkerSettings({ GPU_MEMORY_BUDGET: 'lots' }), /GPU_MEMORY_BUDGET: "lots" is not a size/);
  assert.throws(() => loadWorkerSettings({ GPU_MEMORY_BUDGET: '1024' }), /GPU_MEMORY_BUDGET=1024: at least 256MiB/);
  assert.equal(loadSettings({ GPU_MEMORY_BUDGET: '12GiB' }).gpuMemoryBudgetBytes, 12 * 2 ** 30, 'the API checks it at boot too');
  assert.throws(() => loadSettings({ GPU_MEMORY_BUDGET: '12 parsecs' }), /GPU_MEMORY_BUDGET/);
  assert.throws(() => loadWorkerSettings({ LOG_LEVEL: 'loud' }), /LOG_LEVEL/);
});

test('DEMO_VIDEO: trained unless random is asked, in the API and the worker alike; anything else is refused', () => {
  assert.deepEqual([loadSettings({}).demoVideo, loadWorkerSettings({}).demoVideo], ['trained', 'trained']);
  assert.deepEqual([loadSettings({ DEMO_VIDEO: ' Random ' }).demoVideo, loadWorkerSettings({ DEMO_VIDEO: 'random' }).demoVideo], ['random', 'random']);
  refused({ DEMO_VIDEO: 'noise' }, 'DEMO_VIDEO=');
  assert.throws(() => loadWorkerSettings({ DEMO_VIDEO: 'yes' }), /DEMO_VIDEO=/);
});

test('KILN_CACHE_DIR: XDG_CACHE_HOME/kiln, else ~/.cache/kiln; off disables; never inside the hub cache or a ComfyUI folder', () => {
  assert.equal(loadSettings({ XDG_CACHE_HOME: '/c' }).cacheDir, '/c/kiln');
  assert.match(loadSettings({}).cacheDir ?? '', /[\\/]\.cache[\\/]kiln$/);
  assert.equal(loadWorkerSettings({ KILN_CACHE_DIR: '/k' }).cacheDir, '/k');
  assert.equal(loadWorkerSettings({ KILN_CACHE_DIR: 'Off' }).cacheDir, undefined);
  refused({ KILN_CACHE_DIR: '/hub/kiln', HF_HUB_CACHE: '/hub' }, 'KILN_CACHE_DIR=/hub/kiln is inside the Hugging Face cache');
  refused({ KILN_CACHE_DIR: '/comfy/models/vae/k', COMFYUI_MODELS_DIR: '/comfy/models' }, 'KILN_CACHE_DIR=/comfy/models/vae/k is inside the ComfyUI folder');
  assert.equal(loadSettings({ KILN_CACHE_DIR: '/hubby', HF_HUB_CACHE: '/hub' }).cacheDir, '/hubby', 'a sibling whose name starts alike is fine');
});
