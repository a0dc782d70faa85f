// The CPU time a process has used, from /proc (Linux): what tells a worker that is working but silent (a long
// synchronous call, or starved at its nice level by a busy machine) from one that is stuck in a wait.
import { readFileSync } from 'node:fs';

/** utime + stime of every thread of `pid`, in clock ticks (1/100 s on Linux); null where /proc cannot say. */
export function cpuTicks(pid: number): number | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so count fields after its last ')'.
  // After it: field 3 (state) is index 0, utime (field 14) index 11, stime (field 15) index 12.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(rest[11]);
  const stime = Number(rest[12]);
  return Number.isFinite(utime) && Number.isFinite(stime) ? utime + stime : null;
}
