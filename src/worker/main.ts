// The GPU worker process (node dist/worker.js; docs/architecture.md). It owns the engine, the model pipelines,
// weights loading and media encoding, runs the tasks the API process sends over the IPC channel one at a time
// (runner.ts), and reports protocol events. It never serves HTTP and never touches the job store.
//
// A fault here costs the task in hand, not the service: the API sees the exit, fails the task with the reason and
// starts a new worker. So the worker exits on purpose where its state can no longer be trusted: an uncaught error
// (after saying what it was), a lost GPU device, or the API going away.
import type { Logger } from 'pino';
import { createLogger } from '../common/logger';
import { loadWorkerSettings, SettingsError, type WorkerSettings } from '../config/settings';
import { EngineHolder } from '../engine/engine';
import { imageProfileEntries } from './profiles/image';
import { speechProfileEntry } from './profiles/speech';
import { videoProfileEntries } from './profiles/video';
import { PROTOCOL_VERSION, WORKER_ENV, type FromWorker, type PipelineModule, type ToWorker } from './protocol';
import { ProfileRegistry, type ProfileEntry } from './registry';
import { Runner } from './runner';

const HEARTBEAT_MS = 1000;
/** How often the served profiles are checked for a change (a finished pull, a generated demo checkpoint). */
const PROFILES_MS = 2000;
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
  if (!send) {
    process.stderr.write('kiln worker: no API process to take tasks from. The API starts its GPU worker itself (WORKERS=local, the default); run `npm start`.\n');
    process.exit(EXIT.badSettings);
  }
  const log = createLogger(settings.logLevel).child({ process: 'worker', worker: settings.workerName });
  const report = (event: FromWorker) => {
    if (process.connected) send(event);
  };

  // The worker's own state can no longer be trusted: say why, then exit (the API restarts it).
  let dying = false;
  const die = (message: string, err?: unknown) => {
    if (dying) return;
    dying = true;
    log.error({ err }, message);
    if (!process.connected) process.exit(EXIT.fatal);
    send({ type: 'fatal', message } satisfies FromWorker, () => process.exit(EXIT.fatal));
    setTimeout(() => process.exit(EXIT.fatal), 1000).unref();
  };
  process.on('uncaughtException', (err) => die(`uncaught error: ${err instanceof Error ? err.message : String(err)}`, err));
  process.on('unhandledRejection', (err) => die(`unhandled rejection: ${err instanceof Error ? err.message : String(err)}`, err));
  // The API is gone (closed, or killed): nothing will read what this worker does.
  process.on('disconnect', () => process.exit(0));

  const holder = new EngineHolder();
  const registry = buildRegistry(settings, holder, log, env);
  const runner = new Runner(
    registry,
    (event) => {
      report(event);
      // A lost device leaves native state behind that a new device in this process may trip over: start afresh.
      if ((event.type === 'done' || event.type === 'failed') && holder.lost) die('the GPU device was lost');
    },
    { fitsBeside: (bytes) => holder.peek()?.canFit(bytes) ?? false, log: (msg, extra) => log.warn(extra ?? {}, msg) },
  );

  process.on('message', (m: ToWorker) => {
    if (m.type === 'run') runner.enqueue(m.task);
    else if (m.type === 'cancel') runner.cancel(m.id, m.reason);
    else if (m.type === 'shutdown') {
      void runner.stop().finally(() => {
        holder.destroy();
        process.exit(0);
      });
    }
  });

  let served = JSON.stringify(registry.served());
  // The adapter for /api/health, probed before hello (jobs would create the engine anyway), so a ready worker's
  // health says which GPU it has, or why it has none.
  const gpu = await holder.get().then(
    (e) => ({ available: true, ...(e.describe() as object) }),
    (err: unknown) => ({ available: false, error: err instanceof Error ? err.message : String(err) }),
  );
  report({ type: 'hello', version: PROTOCOL_VERSION, pid: process.pid, name: settings.workerName, profiles: JSON.parse(served), gpu });
  setInterval(() => {
    const memory = holder.peek()?.pool.stats();
    report({ type: 'heartbeat', running: runner.runningIds(), loaded: runner.loadedKeys(), memory: memory ? { ...memory } : undefined });
  }, HEARTBEAT_MS);
  setInterval(() => {
    const now = JSON.stringify(registry.served());
    if (now !== served) report({ type: 'profiles', profiles: JSON.parse((served = now)) });
  }, PROFILES_MS);
  log.info({ pid: process.pid, profiles: registry.all().length }, 'GPU worker ready');
}

/** The built-in models (unless KILN_WORKER_BUILTINS=0), then the entries of KILN_WORKER_PIPELINES over them. */
function buildRegistry(settings: WorkerSettings, holder: EngineHolder, log: Logger, env: NodeJS.ProcessEnv): ProfileRegistry {
  const registry = new ProfileRegistry();
  if (env[WORKER_ENV.builtins] !== '0') {
    for (const entry of [speechProfileEntry(settings, holder, log), ...imageProfileEntries(settings, holder, log), ...videoProfileEntries(settings, holder, log)]) registry.register(entry);
  }
  const raw = env[WORKER_ENV.pipelines];
  for (const spec of raw ? (JSON.parse(raw) as PipelineModule[]) : []) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const made = (require(spec.module) as Record<string, (...args: unknown[]) => ProfileEntry | ProfileEntry[]>)[spec.export](...(spec.args ?? []));
    for (const entry of Array.isArray(made) ? made : [made]) registry.register(entry);
  }
  return registry;
}
