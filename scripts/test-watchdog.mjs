#!/usr/bin/env node
// The test runner's watchdog (scripts/test.mjs starts it beside the run): a test file whose process tree has made no
// CPU progress for STALL_S is hung, not slow (every test here keeps lavapipe or the app busy; nothing idles for
// minutes), as when Dawn/lavapipe deadlocks in native code with every thread in a futex wait. It gets SIGABRT, the
// signal of the known teardown abort, so the runner runs that file once more, alone, and it must pass then.
//   node scripts/test-watchdog.mjs <build dir of the run> [stall seconds, default 300]
import { readdirSync, readFileSync } from 'node:fs';

const [dir, stallArg] = process.argv.slice(2);
const STALL_S = Number(stallArg ?? 300);
const TICK_S = 15;
const hz = 100; // USER_HZ on Linux

function procs() {
  const out = [];
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.push({ pid: Number(pid), ppid: Number(f[1]), cpu: (Number(f[11]) + Number(f[12])) / hz, cmd: readFileSync(`/proc/${pid}/cmdline`, 'utf8') });
    } catch {
      // gone
    }
  }
  return out;
}

/** CPU seconds of a process and all its descendants. */
function treeCpu(all, pid) {
  let sum = 0;
  const stack = [pid];
  while (stack.length) {
    const p = stack.pop();
    for (const q of all) {
      if (q.pid === p) sum += q.cpu;
      if (q.ppid === p) stack.push(q.pid);
    }
  }
  return sum;
}

const seen = new Map(); // pid -> { cpu, since }
setInterval(() => {
  const all = procs();
  const now = Date.now() / 1000;
  for (const p of all) {
    const args = p.cmd.split('\0');
    // a test file's own process (node --test-concurrency=N <file>), not the runner (node --test ... <files>)
    if (args.includes('--test') || !args.some((a) => a.startsWith('--test-concurrency'))) continue;
    const file = args.find((a) => a.startsWith(dir) && a.endsWith('.test.js'));
    if (!file) continue;
    const cpu = treeCpu(all, p.pid);
    const s = seen.get(p.pid);
    if (!s || cpu - s.cpu > 0.5) {
      seen.set(p.pid, { cpu, since: now });
      continue;
    }
    if (now - s.since >= STALL_S) {
      console.error(`\ntest-watchdog: ${file} made no CPU progress for ${Math.round(now - s.since)} s (hung); sending SIGABRT so it runs again`);
      try {
        process.kill(p.pid, 'SIGABRT');
      } catch {
        // it ended meanwhile
      }
      seen.delete(p.pid);
    }
  }
}, TICK_S * 1000);
