// The GPU worker process (node dist/worker.js; docs/architecture.md). It owns the engine, the model pipelines,
// weights loading and media encoding, runs the tasks the API sends one at a time (runner.ts), and reports protocol
// events: over the IPC channel of the API that started it (ipc-host.ts), or through Redis as one of many workers
// (REDIS_URL: redis-host.ts, docs/deploy.md). It never serves HTTP and never touches the job store.
//
// A fault here costs the task in hand, not the service: the API sees the exit, fails the task with the reason and
// starts a new worker. So the worker exits on purpose where its state can no longer be trusted: an uncaught error
// (after saying what it was), a lost GPU device, or the API going away.
import { freemem, totalmem } from 'node:os';
import type { Logger } from 'pino';
import { createLogger } from '../common/logger';
import { checkTensorCores } from '../engine/tensor-cores';
import { loadWorkerSettings, SettingsError, type WorkerSettings } from '../config/settings';
import { EngineHolder } from '../engine/engine';
import { useInt8Cache } from '../engine/int8-cache';
import { imageProfileEntries } from './profiles/image';
import { krea2ProfileEntries } from './profiles/krea2';
import { speechProfileEntry } from './profiles/speech';
import { videoProfileEntries } from './profiles/video';
import { S3Store } from '../storage/s3-store';
import type { WorkerHost } from './host';
import { IpcHost } from './ipc-host';
import { WORKER_ENV, type HostMemory, type PipelineModule } from './protocol';
import { RedisHost } from './redis-host';
import { ProfileRegistry, type ServedEntry } from './registry';
import { Runner } from './runner';

/** Exit codes the API reads (local-worker.ts). */
export const EXIT = { badSettings: 2, fatal: 70 } as const;

export async function runWorker(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  let settings: WorkerSettings;
  try {
    settings = loadWorkerSettings(env);
  } catch (err) {
    if (!(err instanceof SettingsError)) throw err;
    process.stderr.write(`kiln worker: bad setting: ${err.message}\n`);
    process.exit(EXIT.badSettings);
  }
  const send = process.send?.bind(process);
  const redisUrl = settings.cluster.redisUrl;
  if (!send && !redisUrl) {
    process.stderr.write('kiln worker: no API to take tasks from. Either the API starts its GPU worker itself (WORKERS=local, the default: run `npm start`), or a GPU host takes work from Redis: set REDIS_URL (docs/deploy.md).\n');
    process.exit(EXIT.badSettings);
  }
  const log = createLogger(settings.logLevel).child({ process: 'worker', worker: settings.workerName });
  useInt8Cache(settings.cacheDir ?? null); // the int8 profiles' quantised weights (engine/int8-cache.ts)
  const store = settings.cluster.s3 ? new S3Store(settings.cluster.s3) : undefined;
  // the tensor-core kernels are checked on each engine made: 'auto' takes them where they pass (engine/tensor-cores.ts);
  // Dawn's production toggles (validation and robustness off) on a hardware adapter (engine/device.ts)
  const holder = new EngineHolder({ production: true, ...(settings.gpuMemoryBudgetBytes !== undefined ? { memoryBudgetBytes: settings.gpuMemoryBudgetBytes } : {}) }, async (e) => e.useTensorCores(await checkTensorCores(e)));
  const registry = buildRegistry(settings, holder, log, env);
  const shutdown = async (runner: Runner) => {
    await runner.stop();
    if (host instanceof RedisHost) await host.close();
    // waits for the GPU's last work first: a device destroyed with Dawn callbacks owed can abort at exit
    await holder.shutdown().catch((err: unknown) => log.warn({ err }, 'the GPU\'s last work failed while shutting down'));
    process.exit(0);
  };
  // with REDIS_URL the worker takes work from Redis, even when an API started it (WORKERS=local, QUEUE=redis)
  const host: WorkerHost = redisUrl ? new RedisHost(redisUrl, settings.workerName, store, { stallS: settings.stallS, log }) : new IpcHost((m, done) => send!(m, undefined, undefined, done ? () => done() : undefined), shutdown);

  // The worker's own state can no longer be trusted: say why, then exit (the API, or the host's supervisor,
  // starts it again).
  let dying = false;
  const die = (message: string, err?: unknown) => {
    if (dying) return;
    dying = true;
    log.error({ err }, message);
    void host.fatal(message).finally(() => process.exit(EXIT.fatal));
    setTimeout(() => process.exit(EXIT.fatal), 2000).unref();
  };
  process.on('uncaughtException', (err) => die(`uncaught error: ${err instanceof Error ? err.message : String(err)}`, err));
  process.on('unhandledRejection', (err) => die(`unhandled rejection: ${err instanceof Error ? err.message : String(err)}`, err));
  // The API that started this worker is gone (closed, or killed): nothing will read what it does.
  if (send) process.on('disconnect', () => process.exit(0));

  const runner = new Runner(
    registry,
    (event) => {
      host.report(event);
      // A lost device leaves native state behind that a new device in this process may trip over: start afresh.
      if ((event.type === 'done' || event.type === 'failed') && holder.lost) die('the GPU device was lost');
    },
    {
      fitsBeside: (bytes) => holder.peek()?.canFit(bytes) ?? false, log: (msg, extra) => log.warn(extra ?? {}, msg), bindSignal: (signal) => holder.interruptOn(signal),
      // previews travel as the other events do: over the API's IPC channel, or as the BullMQ job's progress (redis-host.ts)
      previews: settings.previews,
    },
  );
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => void shutdown(runner));

  // The adapter for /api/health, probed before the worker says hello (jobs would create the engine anyway), so a
  // ready worker's health says which GPU it has, or why it has none.
  const gpu = await holder.get().then(
    (e) => ({ available: true, ...(e.describe() as object) }),
    (err: unknown) => ({ available: false, error: err instanceof Error ? err.message : String(err) }),
  );
  await host.start(runner, {
    name: settings.workerName,
    pid: process.pid,
    gpu,
    profiles: () => registry.served(),
    now: () => {
      const memory = holder.peek()?.pool.stats();
      return { loaded: runner.loadedKeys(), running: runner.runningIds(), memory: memory ? { ...memory } : undefined, host_memory: hostMemory() };
    },
  });
  log.info({ pid: process.pid, profiles: registry.all().length }, 'GPU worker ready');
}

/** This process's resident set and the memory left to it (the API judges a SIGKILL with them: local-worker.ts). */
function hostMemory(): HostMemory {
  const total = totalmem();
  const cgroup = process.constrainedMemory?.() ?? 0; // 0: no cgroup limit (or none known)
  const limit = cgroup > 0 && cgroup < total ? cgroup : total;
  // os.freemem() is the host's MemAvailable on Linux
  return { rss: process.memoryUsage.rss(), available: freemem(), limit };
}

/** The built-in models (unless KILN_WORKER_BUILTINS=0), then the entries of KILN_WORKER_PIPELINES over them. */
function buildRegistry(settings: WorkerSettings, holder: EngineHolder, log: Logger, env: NodeJS.ProcessEnv): ProfileRegistry {
  const registry = new ProfileRegistry();
  if (env[WORKER_ENV.builtins] !== '0') {
    for (const entry of [speechProfileEntry(settings, holder, log), ...imageProfileEntries(settings, holder, log), ...krea2ProfileEntries(settings, holder, log), ...videoProfileEntries(settings, holder, log)]) registry.register(entry);
  }
  const raw = env[WORKER_ENV.pipelines];
  for (const spec of raw ? (JSON.parse(raw) as PipelineModule[]) : []) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const made = (require(spec.module) as Record<string, (...args: unknown[]) => ServedEntry | ServedEntry[]>)[spec.export](...(spec.args ?? []));
    for (const entry of Array.isArray(made) ? made : [made]) registry.register(entry);
  }
  // WORKER_PROFILES: only these (a host whose GPU holds one model family, say)
  if (settings.workerProfiles) registry.keepOnly(settings.workerProfiles);
  return registry;
}
