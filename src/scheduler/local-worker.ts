// The GPU worker this API process starts and supervises (WORKERS=local): a child process (dist/worker.js) with an
// IPC channel. It is restarted whenever it ends: at once after a crash while it ran tasks, with a growing delay
// (1, 2, 4 ... 60 s) while it keeps dying before it says hello. A worker that says nothing for WORKER_STALL_S (its
// heartbeat is every second) and uses no CPU is stuck, in a driver wait most likely: it is killed and restarted the
// same way. One that is silent but keeps using the CPU is working (a long synchronous call such as a software GPU's
// shader compile, slowed further when a busy machine starves it at its nice level): it gets WORKER_BUSY_S.
import { ChildProcess, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { DemoVideo } from '../config/settings';
import { PROTOCOL_VERSION, WORKER_ENV, type FromWorker, type PipelineModule, type ServedSummary, type ToWorker, type WorkerTask } from '../worker/protocol';
import { cpuTicks } from './process-cpu';
import type { WorkerLink, WorkerPool, WorkerStatus } from './worker-link';

export interface LocalWorkerOptions {
  /** The settings the worker shares with the API, passed in its environment. */
  dataDir: string;
  weightsDir: string;
  /** Passed as HF_HUB_CACHE, so the worker reads the cache the API resolved (from HF_HOME, say). */
  hubCacheDir?: string;
  demoWeightsDir: string;
  /** Passed as KILN_CACHE_DIR (null: `off`), so the worker keeps its int8 cache where the API resolved it. Undefined:
   * the worker's environment decides. */
  cacheDir?: string | null;
  /** DEMO_VIDEO; unset: the worker's own default. */
  demoVideo?: DemoVideo;
  logLevel: string;
  stallS: number;
  /** Silent but using the CPU: how long before it is killed all the same (a step that never ends; WORKER_BUSY_S). */
  busyS: number;
  /** nice value of the worker process (0 = as the API). */
  nice: number;
  log: Logger;
  /** Profile entries of the caller's own (tests, benches) and whether the built-in models are served too. */
  pipelines?: PipelineModule[];
  builtins?: boolean;
  /** The worker's entry script. Default: worker.js beside this build's main.js. */
  script?: string;
  /** More environment for the worker (the cluster settings when it joins the fleet through Redis). */
  env?: Record<string, string>;
}

const now = () => Date.now() / 1000;
const MAX_BACKOFF_S = 60;
/** Seconds a new worker may take to say hello. */
const START_S = 60;
const NICE = '/usr/bin/nice';

export class LocalWorker extends EventEmitter implements WorkerLink, WorkerPool {
  private child: ChildProcess | undefined;
  private state: WorkerStatus['state'] = 'starting';
  private pid: number | null = null;
  private helloName: string | null = null;
  private readySince: number | null = null;
  private lastWord = 0;
  /** While the worker is silent: its CPU ticks when last seen to move, and when that was (null: /proc cannot say). */
  private cpu: { ticks: number; movedAt: number } | null | undefined;
  private restarts = 0;
  /** Deaths before hello in a row: the restart delay doubles with each. */
  private failedStarts = 0;
  private lastExit: WorkerStatus['last_exit'] = null;
  /** Why we killed the current process, or what it said before dying. */
  private exitReason: string | undefined;
  private heartbeat: Extract<FromWorker, { type: 'heartbeat' }> | undefined;
  private adapter: Record<string, unknown> | undefined;
  private served: ServedSummary[] = [];
  private restartTimer: NodeJS.Timeout | undefined;
  private readonly watchdog: NodeJS.Timeout;

  constructor(private readonly o: LocalWorkerOptions) {
    super();
    this.watchdog = setInterval(() => this.checkStall(), 1000);
    this.watchdog.unref();
  }

  get ready(): boolean {
    return this.state === 'ready';
  }

  /** The worker's WORKER_NAME once it said hello. */
  get name(): string {
    return this.helloName ?? 'local';
  }

  lostText(reason: string, doing: string, what: 'job' | 'request'): string {
    return `GPU worker ${reason} while ${doing}; the ${what} was not finished`;
  }

  /** The process that held it is gone with everything it had: nothing of it can run there any more. */
  async withdraw(): Promise<boolean> {
    return true;
  }

  get profiles(): readonly ServedSummary[] {
    return this.served;
  }

  gpu(): Record<string, unknown> | undefined {
    if (!this.adapter) return undefined;
    return this.heartbeat?.memory ? { ...this.adapter, memory: this.heartbeat.memory } : this.adapter;
  }

  /** Starts the worker; resolves at its hello, or after `waitMs` if it has not said it by then (it goes on starting). */
  start(waitMs = 30_000): Promise<void> {
    this.spawn();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, waitMs);
      this.once('ready', () => (clearTimeout(timer), resolve()));
    });
  }

  run(task: WorkerTask): void {
    this.send({ type: 'run', task });
  }

  cancel(id: string, reason: 'cancelled' | 'interrupted'): void {
    this.send({ type: 'cancel', id, reason });
  }

  kill(reason: string): void {
    if (!this.child || this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.exitReason ??= reason;
    this.o.log.warn({ pid: this.pid, reason }, 'killing the GPU worker');
    this.child.kill('SIGKILL');
  }

  // ---- a pool of one: the scheduler routes everything to this worker ----

  readonly fixed = true;

  links(): WorkerLink[] {
    return [this];
  }

  link(name: string): WorkerLink | undefined {
    return name === this.name ? this : undefined;
  }

  health(): Record<string, unknown> {
    return {};
  }

  async stop(graceMs: number): Promise<void> {
    clearInterval(this.watchdog);
    clearTimeout(this.restartTimer);
    const child = this.child;
    this.state = 'stopped';
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    this.send({ type: 'shutdown' });
    const timer = setTimeout(() => this.kill(`it did not stop within ${graceMs / 1000} s of the shutdown`), graceMs);
    await exited;
    clearTimeout(timer);
  }

  status(): WorkerStatus {
    return {
      mode: 'local',
      state: this.state,
      pid: this.pid,
      name: this.helloName,
      restarts: this.restarts,
      ready_since: this.readySince,
      last_exit: this.lastExit,
      loaded: this.heartbeat?.loaded ?? [],
      running: this.heartbeat?.running ?? [],
      heartbeat_age_s: this.state === 'ready' ? Math.round((now() - this.lastWord) * 1000) / 1000 : null,
      stalled_after_s: this.o.stallS,
      busy_stalled_after_s: this.o.busyS,
    };
  }

  private send(m: ToWorker): void {
    if (this.child?.connected) this.child.send(m);
  }

  private spawn(): void {
    const child = spawnWorker(this.o);
    this.child = child;
    this.state = 'starting';
    this.pid = child.pid ?? null;
    this.helloName = null;
    this.readySince = null;
    this.exitReason = undefined;
    this.heartbeat = undefined;
    this.lastWord = now();
    child.on('message', (m: FromWorker) => this.onMessage(m));
    child.on('error', (err) => this.o.log.error({ err }, 'GPU worker process error'));
    child.once('exit', (code, signal) => this.onExit(child, code, signal));
  }

  private onMessage(m: FromWorker): void {
    this.lastWord = now();
    this.cpu = undefined;
    switch (m.type) {
      case 'hello':
        if (m.version !== PROTOCOL_VERSION) {
          this.kill(`it speaks protocol version ${m.version}, this API ${PROTOCOL_VERSION} (mixed builds)`);
          return;
        }
        this.state = 'ready';
        this.helloName = m.name;
        this.readySince = now();
        this.served = m.profiles;
        this.adapter = m.gpu;
        this.failedStarts = 0;
        this.o.log.info({ pid: m.pid, name: m.name }, 'GPU worker ready');
        this.emit('ready');
        return;
      case 'profiles':
        this.served = m.profiles;
        return;
      case 'heartbeat':
        this.heartbeat = m;
        return;
      case 'fatal':
        this.exitReason ??= m.message;
        return;
      default:
        this.emit('event', m);
    }
  }

  private onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (child !== this.child) return;
    const wasReady = this.state === 'ready';
    const reason = exitText(code, signal, this.exitReason, this.heartbeat, this.lastWord);
    this.lastExit = { at: now(), reason };
    this.heartbeat = undefined;
    if (this.state === 'stopped') {
      this.emit('lost', reason);
      return;
    }
    this.o.log.error({ pid: this.pid, code, signal, reason }, 'GPU worker ended');
    this.state = 'restarting';
    this.emit('lost', reason);
    if (!wasReady) this.failedStarts++;
    const delayS = this.failedStarts === 0 ? 0 : Math.min(MAX_BACKOFF_S, 2 ** (this.failedStarts - 1));
    this.restartTimer = setTimeout(() => {
      this.restarts++;
      this.spawn();
    }, delayS * 1000);
  }

  private checkStall(): void {
    const quiet = now() - this.lastWord;
    if (this.state === 'ready' && quiet > 1) this.watchCpu();
    if (this.state === 'ready' && quiet > this.o.stallS) {
      const busy = this.cpu ? now() - this.cpu.movedAt <= this.o.stallS : false;
      if (!busy) this.kill(`it stopped answering (no heartbeat for ${Math.round(quiet)} s)`);
      else if (quiet > this.o.busyS) this.kill(`it stopped answering (no heartbeat for ${Math.round(quiet)} s, busy on the CPU all along)`);
      else if (quiet - this.o.stallS <= 1) this.o.log.warn({ pid: this.pid, quiet_s: Math.round(quiet), busy_stalled_after_s: this.o.busyS }, 'the GPU worker is silent but using the CPU: a long synchronous step, or a busy machine; waiting');
    }
    // loading the modules and opening the GPU takes a second or two, more on a busy machine; a hung driver longer
    if (this.state === 'starting' && quiet > Math.max(this.o.stallS, START_S)) this.kill(`it did not start (no hello after ${Math.round(quiet)} s)`);
  }

  /** Samples the silent worker's CPU time; its first sample counts as moving at the worker's last word. */
  private watchCpu(): void {
    if (this.cpu === null || this.pid === null) return;
    const ticks = cpuTicks(this.pid);
    if (ticks === null) this.cpu = null;
    else if (!this.cpu) this.cpu = { ticks, movedAt: this.lastWord };
    else if (ticks - this.cpu.ticks >= 2) this.cpu = { ticks, movedAt: now() }; // 20 ms or more since: working
  }
}

/** Starts dist/worker.js (beside this build's main.js) with the settings it shares with the API in its environment,
 * at the worker's CPU priority, with an IPC channel. */
export function spawnWorker(o: Omit<LocalWorkerOptions, 'stallS' | 'busyS' | 'log'>): ChildProcess {
  const script = o.script ?? join(__dirname, '..', 'worker.js');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: o.dataDir,
    WEIGHTS_DIR: o.weightsDir,
    ...(o.hubCacheDir ? { HF_HUB_CACHE: o.hubCacheDir } : {}),
    ...(o.cacheDir !== undefined ? { KILN_CACHE_DIR: o.cacheDir ?? 'off' } : {}),
    DEMO_WEIGHTS_DIR: o.demoWeightsDir,
    ...(o.demoVideo ? { DEMO_VIDEO: o.demoVideo } : {}),
    LOG_LEVEL: o.logLevel,
    [WORKER_ENV.pipelines]: JSON.stringify(o.pipelines ?? []),
    [WORKER_ENV.builtins]: o.builtins === false ? '0' : '1',
    ...o.env,
  };
  delete env.API_TOKEN; // the worker serves no HTTP
  const node = [process.execPath, ...process.execArgv.filter((a) => !a.startsWith('--test')), script];
  const [cmd, ...args] = o.nice > 0 && existsSync(NICE) ? [NICE, '-n', String(o.nice), ...node] : node;
  return spawn(cmd, args, { env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
}

/** "crashed (SIGSEGV)", "exited (code 70: uncaught error: boom)", "was killed: <why Kiln killed it>", or, for a
 * SIGKILL Kiln did not send, what is known: the signal, and the memory last seen when it points to memory. */
function exitText(code: number | null, signal: NodeJS.Signals | null, why: string | undefined, beat?: MemorySeen, seenAt?: number): string {
  if (signal === 'SIGKILL') return why ? `was killed: ${why}` : `was killed (${killedFromOutside(beat, seenAt === undefined ? undefined : now() - seenAt)})`;
  if (signal) return `crashed (${signal}${why ? `: ${why}` : ''})`;
  return `exited (code ${code}${why ? `: ${why}` : ''})`;
}

/** The memory figures of the worker's last heartbeat. */
export type MemorySeen = Pick<Extract<FromWorker, { type: 'heartbeat' }>, 'memory' | 'host_memory'>;

/** Near a limit: the worker's resident set at 85 % or more of the host's (or cgroup's) memory, 10 % or less of it
 * left available, or the GPU memory in use at 95 % or more of the budget. */
const NEAR_LIMIT = { rss: 0.85, available: 0.1, gpu: 0.95 } as const;

/**
 * A SIGKILL that Kiln did not send: an operator, a supervisor or the system's out-of-memory killer sent it, and the
 * exit status cannot tell which. So it says the signal, and names memory only when the last heartbeat (`ageS` seconds
 * before the exit) showed the worker near a memory limit, with those figures.
 */
export function killedFromOutside(beat: MemorySeen | undefined, ageS?: number): string {
  const said = 'SIGKILL, not sent by Kiln';
  const host = beat?.host_memory;
  const gpu = beat?.memory;
  const seen: string[] = [];
  if (host && host.limit > 0 && (host.rss >= NEAR_LIMIT.rss * host.limit || host.available <= NEAR_LIMIT.available * host.limit)) {
    seen.push(`the worker held ${gib(host.rss)} of ${gib(host.limit)} with ${gib(host.available)} available`);
  }
  if (gpu && gpu.budgetBytes > 0 && gpu.inUseBytes >= NEAR_LIMIT.gpu * gpu.budgetBytes) {
    seen.push(`GPU memory ${gib(gpu.inUseBytes)} in use of its ${gib(gpu.budgetBytes)} budget`);
  }
  if (!host && !gpu) return said;
  if (!seen.length) return `${said}; its memory was not near a limit when last seen`;
  const when = ageS === undefined ? 'when last seen' : `${Math.max(0, Math.round(ageS))} s before`;
  return `${said}; likely the system's out-of-memory killer: ${when}, ${seen.join(', ')}`;
}

const gib = (bytes: number) => `${(bytes / 2 ** 30).toFixed(1)} GiB`;
