// Child-process handling for ffmpeg: the system's (Debian's `ffmpeg` package, installed by scripts/setup-system.sh
// and the Docker image: a maintained build with libx264, libmp3lame, libopus, libvorbis and the native aac/flac
// codecs), or the one FFMPEG names. resolveFfmpeg() below is the one place the API, the worker and the tests find it.
//
// Every ffmpeg this module starts has a deadline and dies with SIGKILL when it passes or when the
// caller's AbortSignal fires, so a crafted input or a stuck pipe can never hang a job.
// Callers decide what a failed exit means (bad user input, or an internal encode failure).
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { CancelledError } from '../common/errors';

/**
 * The ffmpeg every part of Kiln runs: FFMPEG (an absolute path) when set, else the first executable `ffmpeg` on PATH.
 * Not found: the bare name, so a job that needs it fails with the spawn error and the hint from describeExit.
 */
export function resolveFfmpeg(env: NodeJS.ProcessEnv = process.env): string {
  const named = env.FFMPEG?.trim();
  if (named) {
    if (!isAbsolute(named)) throw new Error(`FFMPEG must be an absolute path to an ffmpeg executable, not "${named}"`);
    return named;
  }
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, 'ffmpeg');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return 'ffmpeg';
}

export const FFMPEG_PATH: string = resolveFfmpeg();

/** What to do when ffmpeg cannot be started at all. */
const NO_FFMPEG_HINT = 'install ffmpeg (scripts/setup-system.sh, or apt-get install ffmpeg) or set FFMPEG to its path';

/** Arguments every invocation starts with: no banner, no interactive stdin, no progress lines. */
export const BASE_ARGS = ['-hide_banner', '-nostdin', '-nostats'];

export type FfmpegEnd = 'exit' | 'timeout' | 'cancelled' | 'stopped' | 'spawn-error';

export interface FfmpegExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Why the process ended: on its own, killed by the deadline, by the AbortSignal, or by stop(). */
  end: FfmpegEnd;
  /** The start of stderr (stream listing, first errors) and its tail, joined with "...". */
  stderr: string;
}

export interface FfmpegStartOptions {
  /** Deadline for the whole process in ms; Infinity for none (then the caller must arm one with setDeadline). */
  timeoutMs: number;
  signal?: AbortSignal;
  /** Number of extra writable pipes into ffmpeg, as fd 3, 4, ... (read by ffmpeg as pipe:3 ...). */
  extraPipes?: number;
  /** Whether ffmpeg's stdout is piped back (decoders) or discarded (encoders writing a file). */
  stdout?: 'pipe' | 'ignore';
}

const STDERR_HEAD = 32 * 1024;
const STDERR_TAIL = 8 * 1024;

/** One running ffmpeg. `exited` never rejects; inspect `end` and `code`. */
export class FfmpegProcess {
  readonly child: ChildProcess;
  readonly stdin: Writable;
  readonly stdout: Readable | null;
  /** fd 3, 4, ... in order. */
  readonly pipes: Writable[];
  readonly exited: Promise<FfmpegExit>;
  private end: FfmpegEnd = 'exit';
  private timer: NodeJS.Timeout | undefined;
  private head = '';
  private tail = '';
  private finished = false;
  private readonly onAbort = () => this.kill('cancelled');

  constructor(args: string[], private readonly opts: FfmpegStartOptions) {
    const extra = opts.extraPipes ?? 0;
    const stdio: ('pipe' | 'ignore')[] = ['pipe', opts.stdout ?? 'pipe', 'pipe'];
    for (let i = 0; i < extra; i++) stdio.push('pipe');
    this.child = spawn(FFMPEG_PATH, [...BASE_ARGS, ...args], { stdio });
    this.stdin = this.child.stdin!;
    this.stdout = this.child.stdout;
    this.pipes = [];
    for (let i = 0; i < extra; i++) this.pipes.push(this.child.stdio[3 + i] as Writable);
    // EPIPE and friends: ffmpeg closing its inputs early is reported through the exit status.
    for (const w of [this.stdin, ...this.pipes]) w.on('error', () => undefined);
    this.child.stderr!.setEncoding('utf8');
    this.child.stderr!.on('data', (s: string) => this.keepStderr(s));

    this.exited = new Promise<FfmpegExit>((resolve) => {
      let spawnFailed = false;
      this.child.once('error', (err) => {
        // Spawn failure (binary missing): there will be no 'close' in some Node versions.
        spawnFailed = true;
        this.end = 'spawn-error';
        this.keepStderr(`\nspawn failed: ${err.message}`);
        this.cleanup();
        resolve({ code: null, signal: null, end: this.end, stderr: this.stderrText() });
      });
      this.child.once('close', (code, signal) => {
        if (spawnFailed) return;
        this.cleanup();
        resolve({ code, signal, end: this.end, stderr: this.stderrText() });
      });
    });

    if (opts.signal?.aborted) this.kill('cancelled');
    else opts.signal?.addEventListener('abort', this.onAbort, { once: true });
    this.setDeadline(opts.timeoutMs);
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** (Re)arms the deadline: the process is killed `ms` from now unless it has exited. */
  setDeadline(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.finished || !Number.isFinite(ms)) return;
    this.timer = setTimeout(() => this.kill('timeout'), Math.max(0, ms));
    this.timer.unref();
  }

  /** Ends the process now; the first reason given is the one reported. */
  kill(reason: Exclude<FfmpegEnd, 'exit' | 'spawn-error'> = 'stopped'): void {
    if (this.finished) return;
    if (this.end === 'exit') this.end = reason;
    this.child.kill('SIGKILL');
  }

  private keepStderr(s: string): void {
    if (this.head.length < STDERR_HEAD) {
      const room = STDERR_HEAD - this.head.length;
      this.head += s.slice(0, room);
      s = s.slice(room);
    }
    if (s) this.tail = (this.tail + s).slice(-STDERR_TAIL);
  }

  private stderrText(): string {
    return this.tail ? `${this.head}\n...\n${this.tail}` : this.head;
  }

  private cleanup(): void {
    this.finished = true;
    if (this.timer) clearTimeout(this.timer);
    this.opts.signal?.removeEventListener('abort', this.onAbort);
  }
}

export interface RunOptions {
  timeoutMs: number;
  signal?: AbortSignal;
  /** Bytes fed to stdin (ffmpeg reads them as `-i pipe:0`); stdin is closed afterwards either way. */
  input?: Buffer;
  /** Receives stdout as it arrives. Return false to stop ffmpeg (the exit then reports end 'stopped'). */
  onStdout?: (chunk: Buffer) => boolean | void;
}

/** Runs ffmpeg to completion. Throws CancelledError if the signal fired; otherwise returns the exit for the caller to judge. */
export async function runFfmpeg(args: string[], opts: RunOptions): Promise<FfmpegExit> {
  const p = new FfmpegProcess(args, { timeoutMs: opts.timeoutMs, signal: opts.signal, stdout: opts.onStdout ? 'pipe' : 'ignore' });
  if (opts.onStdout && p.stdout) {
    const on = opts.onStdout;
    p.stdout.on('data', (chunk: Buffer) => {
      if (on(chunk) === false) p.kill('stopped');
    });
  }
  if (opts.input) p.stdin.end(opts.input);
  else p.stdin.end();
  const exit = await p.exited;
  if (exit.end === 'cancelled') throw new CancelledError(abortReason(opts.signal));
  return exit;
}

export function abortReason(signal: AbortSignal | undefined): string {
  return typeof signal?.reason === 'string' ? signal.reason : 'cancelled';
}

/** The last meaningful stderr line, for error messages and logs (ffmpeg puts the cause last). */
export function lastErrorLine(stderr: string): string {
  const lines = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && l !== '...' && !/^(frame=|size=|video:|\[.* @ 0x[0-9a-f]+\] (Qavg|frame [IPB]|mb [IPB]|final ratefactor|kb\/s|ref [PB]|Weighted|consecutive|i16|i8|i4|8x8|coded y|SSIM|PSNR|Last message repeated))/.test(l));
  return lines.length ? lines[lines.length - 1] : 'no diagnostic from ffmpeg';
}

/** Describes a non-zero or killed exit in one line, for internal (500-class) errors. */
export function describeExit(what: string, exit: FfmpegExit, timeoutMs?: number): string {
  if (exit.end === 'timeout') return `${what}: ffmpeg exceeded its ${Math.round((timeoutMs ?? 0) / 1000)} s deadline and was killed`;
  if (exit.end === 'spawn-error') return `${what}: could not start ffmpeg at ${FFMPEG_PATH} (${lastErrorLine(exit.stderr)}); ${NO_FFMPEG_HINT}`;
  return `${what}: ffmpeg exited with ${exit.code ?? exit.signal}: ${lastErrorLine(exit.stderr)}`;
}
