// The service under load, in its own process so the load generator does not share its event loop: the same
// modules and HTTP set-up as src/main.ts, on DATA_DIR/API_TOKEN/LOG_LEVEL from the environment, port 0 on
// loopback. An image pipeline (imgmain) that a gate can hold stands in for the model; the parent drives it
// over IPC: {cmd:'hold'|'release'|'stats'}. Replies: {url} once listening, {stats} on request.
import 'reflect-metadata';
import { createApp } from '../../src/app.factory';
import { resolveToken } from '../../src/auth/token';
import { createLogger } from '../../src/common/logger';
import { loadSettings } from '../../src/config/settings';
import { JobWaiters } from '../../src/jobs/job.waiters';
import { PipelineRegistry } from '../../src/scheduler/pipeline';
import { HoldGate, recordingPipeline } from '../../test/api/fixtures/restart-pipelines';

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
  const app = await createApp({ settings, token, log });
  const gate = new HoldGate();
  const runs: string[] = [];
  // BENCH_BUILTIN=1: the service's own models (on demo weights) instead of the gated stand-in.
  if (process.env.BENCH_BUILTIN !== '1') app.get(PipelineRegistry).register(recordingPipeline('image', 'imgmain', { runs, gate, stepMs: 1 }));
  await app.listen(0, '127.0.0.1');
  const waiters = app.get(JobWaiters);

  process.on('message', (m: { cmd: string }) => {
    if (m.cmd === 'hold') gate.close();
    if (m.cmd === 'release') gate.open();
    if (m.cmd === 'stats') {
      const mem = process.memoryUsage();
      const stats: ServerStats = { rss: mem.rss, heapUsed: mem.heapUsed, waiters: waiters.count(), runs: runs.length };
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
