// The service under load, in its own process so the load generator does not share its event loop: the same
// modules and HTTP set-up as src/main.ts, on DATA_DIR/API_TOKEN/LOG_LEVEL from the environment, port 0 on
// loopback, with its GPU worker. An image pipeline (imgmain) that a gate can hold stands in for the model in the
// worker (BENCH_BUILTIN=1: the service's own models on demo weights instead); the parent drives it over IPC:
// {cmd:'hold'|'release'|'stats'}. Replies: {url} once listening, {stats} on request.
import 'reflect-metadata';
import { createApp } from '../../src/app.factory';
import { resolveToken } from '../../src/auth/token';
import { createLogger } from '../../src/common/logger';
import { loadSettings } from '../../src/config/settings';
import { JobWaiters } from '../../src/jobs/job.waiters';
import { makeGate, makeLog } from '../../test/api/control';
import { testPipeline } from '../../test/api/test-pipelines';

export interface ServerStats {
  rss: number;
  heapUsed: number;
  waiters: number;
  runs: number;
}

async function main(): Promise<void> {
  const settings = loadSettings({ ...process.env, PORT: '0', HOST: '127.0.0.1' });
  const log = createLogger(settings.logLevel);
  const { token } = resolveToken(settings.apiToken, settings.dataDir);
  const gate = makeGate(true);
  const runs = makeLog();
  const builtin = process.env.BENCH_BUILTIN === '1';
  const app = await createApp({ settings, token, log, worker: { pipelines: builtin ? [] : [testPipeline('image', 'imgmain', { log: runs, gate, stepMs: 1 })] } });
  await app.listen(0, '127.0.0.1');
  const waiters = app.get(JobWaiters);

  process.on('message', (m: { cmd: string }) => {
    if (m.cmd === 'hold') gate.close();
    if (m.cmd === 'release') gate.openAll();
    if (m.cmd === 'stats') {
      const mem = process.memoryUsage();
      const stats: ServerStats = { rss: mem.rss, heapUsed: mem.heapUsed, waiters: waiters.count(), runs: runs.events.filter((e) => e.startsWith('run ')).length };
      process.send!({ stats });
    }
  });
  // The parent going away (even killed) closes the IPC channel: do not outlive it.
  process.on('disconnect', () => process.exit(0));
  process.send!({ url: (await app.getUrl()).replace('[::1]', '127.0.0.1') });
}

main().catch((err) => {
  process.stderr.write(`bench server: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
