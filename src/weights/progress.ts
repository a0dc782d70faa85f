// Download progress for a terminal (one bar redrawn in place, at most 10 times a second) or a log (one line per
// interval, default 10 s, so CI logs and `nohup` files stay short).
import { fmtBytes } from '../common/bytes';

export interface ProgressOut {
  write(s: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface ProgressOptions {
  /** Seconds between lines when not a TTY. Default 10. */
  intervalMs?: number;
  now?: () => number;
}

export { fmtBytes };

function fmtDuration(s: number): string {
  if (!Number.isFinite(s)) return '?';
  if (s < 60) return `${Math.round(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

/** One file's progress. `start` before the first byte, `update` per chunk, `end` once. */
export class Progress {
  private readonly now: () => number;
  private readonly intervalMs: number;
  private t0 = 0;
  private from = 0;
  private last = 0;
  private drawn = false;

  constructor(
    private readonly out: ProgressOut,
    private readonly label: string,
    opts: ProgressOptions = {},
  ) {
    this.now = opts.now ?? Date.now;
    this.intervalMs = opts.intervalMs ?? 10_000;
  }

  /** `from`: bytes already on disk (a resumed .part); speed counts only this run's bytes. */
  start(from = 0): void {
    this.t0 = this.now();
    this.last = this.t0;
    this.from = from;
  }

  update(done: number, total: number | undefined): void {
    const t = this.now();
    if (this.out.isTTY) {
      if (t - this.last < 100 && done !== total) return;
      this.last = t;
      this.out.write(`\r\x1b[K${this.bar(done, total, t)}`);
      this.drawn = true;
    } else if (t - this.last >= this.intervalMs) {
      this.last = t;
      this.out.write(`${this.line(done, total, t)}\n`);
    }
  }

  end(summary: string): void {
    this.out.write(`${this.out.isTTY && this.drawn ? '\r\x1b[K' : ''}${this.label}: ${summary}\n`);
  }

  private rate(done: number, t: number): number {
    const s = (t - this.t0) / 1000;
    return s > 0 ? (done - this.from) / s : 0;
  }

  private line(done: number, total: number | undefined, t: number): string {
    const r = this.rate(done, t);
    if (total === undefined) return `${this.label}: ${fmtBytes(done)}, ${fmtBytes(r)}/s`;
    const pct = total > 0 ? Math.floor((done / total) * 100) : 100;
    const eta = r > 0 ? fmtDuration((total - done) / r) : '?';
    return `${this.label}: ${fmtBytes(done)} of ${fmtBytes(total)} (${pct}%), ${fmtBytes(r)}/s, about ${eta} left`;
  }

  private bar(done: number, total: number | undefined, t: number): string {
    const r = this.rate(done, t);
    const speed = `${fmtBytes(r)}/s`;
    if (total === undefined) return `${this.label} ${fmtBytes(done)} ${speed}`;
    const frac = total > 0 ? Math.min(1, done / total) : 1;
    const width = 24;
    const filled = Math.round(frac * width);
    const eta = r > 0 ? fmtDuration((total - done) / r) : '?';
    const text = `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${String(Math.floor(frac * 100)).padStart(3)}% ${fmtBytes(done)}/${fmtBytes(total)} ${speed} ${eta} ${this.label}`;
    const cols = this.out.columns ?? 100;
    return text.length > cols - 1 ? `${text.slice(0, cols - 2)}…` : text;
  }
}
