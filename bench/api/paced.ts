// An open-loop load generator: requests leave at a fixed pace (one every 1000/rate ms), whatever the server's
// answers do, and each latency is measured from the moment the request was due, so a stall shows up in the
// requests it delayed (no coordinated omission).
//
// Why not autocannon's overallRate alone: autocannon (9.0) lets every connection send its whole per-second
// quota back to back at the start of each second and then idle, so "500 req/s" is a 500-request burst each
// second; and its coordinated-omission correction uses Math.ceil(1 / rate) = 1 ms as the expected interval,
// which back-fills a synthetic sample for every millisecond of every response and inflates p99 several-fold.
import http from 'node:http';

export interface PacedResult {
  sent: number;
  ok: number;
  bad: number;
  /** Achieved answers per second over the run. */
  rps: number;
  p50: number;
  p99: number;
  max: number;
}

/** `seconds` of requests at `rate`; with `until`, sending stops early once it returns true (checked before each
 * batch), and the result covers what was sent. */
export async function paced(base: string, path: () => string, o: { rate: number; seconds: number; headers: Record<string, string>; until?: () => boolean }): Promise<PacedResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  let total = Math.round(o.rate * o.seconds);
  const interval = 1000 / o.rate;
  const latencies: number[] = [];
  let ok = 0;
  let bad = 0;
  let answered = 0;
  const start = performance.now();
  let finish!: () => void;
  const allDone = new Promise<void>((r) => (finish = r));

  const fire = (due: number) => {
    const req = http.get(base + path(), { agent, headers: o.headers }, (res) => {
      res.resume(); // the body is read and dropped: only its arrival matters here
      res.on('end', () => {
        latencies.push(performance.now() - due);
        if (res.statusCode === 200) ok++;
        else bad++;
        if (++answered === total) finish();
      });
    });
    req.on('error', () => {
      bad++;
      if (++answered === total) finish();
    });
  };

  let i = 0;
  const tick = () => {
    if (o.until?.()) {
      total = i;
      if (answered === total) finish();
      return;
    }
    const now = performance.now();
    while (i < total && start + i * interval <= now) fire(start + interval * i++);
    if (i < total) setTimeout(tick, Math.max(0, start + i * interval - performance.now()));
  };
  tick();
  await allDone;
  const elapsed = (performance.now() - start) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => round1(latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? NaN);
  return { sent: total, ok, bad, rps: Math.round(answered / elapsed), p50: pct(50), p99: pct(99), max: round1(latencies[latencies.length - 1] ?? NaN) };
}

const round1 = (x: number) => Math.round(x * 10) / 10;
