// Boots the real app (the same AppModule and configureApp as main.ts) on a temp data dir, with its real GPU worker
// process serving test pipelines (test-pipelines.ts) and/or the built-in models, and returns a supertest agent.
import 'reflect-metadata';
import { Test } from '@nestjs/testing';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import request from 'supertest';
import { AppModule } from '../../src/app.module';
import { configureApp } from '../../src/app.setup';
import { loadSettings, Settings } from '../../src/config/settings';
import { GpuProbe } from '../../src/health/gpu.probe';
import { InputProbe } from '../../src/jobs/input-probe';
import { JobsService } from '../../src/jobs/jobs.service';
import { OutboundClient, OutboundOptions } from '../../src/net/outbound';
import { Scheduler } from '../../src/scheduler/scheduler';
import type { PipelineModule } from '../../src/worker/protocol';
import { Exchange, openapiProblems, recordTraffic } from './openapi-traffic';

export const TOKEN = 'test-token-0123456789';

export interface TestApp {
  app: NestExpressApplication;
  http: ReturnType<typeof request>;
  url: string;
  dataDir: string;
  settings: Settings;
  scheduler: Scheduler;
  jobs: JobsService;
  /** Closes the app (the data dir stays unless `removeData`). */
  close(removeData?: boolean): Promise<void>;
}

export interface TestAppOptions {
  dataDir?: string;
  env?: Record<string, string>;
  /** Test pipelines the worker serves (over the built-in models of the same profile). */
  pipelines?: PipelineModule[];
  outbound?: Partial<OutboundOptions>;
  probe?: InputProbe;
  gpu?: GpuProbe | 'real';
  /** false: leave out the models the service registers itself (speech, the Qwen-Image-2.1 and MiniMax H3 profiles), to test
   * the answers of a service without them. */
  builtinPipelines?: boolean;
  /** Records every exchange of the server here (test/api/openapi-traffic.ts checks them against /openapi.json). */
  traffic?: Exchange[];
  /** false: close() does not check this server's traffic against /openapi.json (by default it does, issue 47). Only
   * for a test that deliberately makes the service send what the document cannot describe; say why where it is set. */
  openapiAudit?: boolean;
}

/** A GPU section that needs no device (most API tests must not depend on a WebGPU adapter). */
export class StaticGpuProbe extends GpuProbe {
  async describe() {
    return { available: false, error: 'test: no adapter probed' };
  }
}

export async function startApp(opts: TestAppOptions = {}): Promise<TestApp> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'kiln-api-'));
  // the video profiles on the random demo unless a test asks for the trained one (DEMO_VIDEO=trained): its jobs take
  // minutes on lavapipe, and only test/api/demo-video-draws looks at what it draws
  // and never a developer's own Hugging Face cache (real weights found there would replace the demo checkpoints)
  const settings = loadSettings({ DATA_DIR: dataDir, API_TOKEN: TOKEN, LOG_LEVEL: 'silent', DEMO_VIDEO: 'random', HF_HUB_CACHE: join(dataDir, 'no-hub-cache'), KILN_CACHE_DIR: join(dataDir, 'kiln-cache'), ...opts.env });
  const log = pino({ level: process.env.KILN_TEST_LOG ?? 'silent' });
  const worker = { pipelines: opts.pipelines, builtins: opts.builtinPipelines !== false };
  let builder = Test.createTestingModule({ imports: [AppModule.forRoot({ settings, token: TOKEN, log, worker })] })
    .overrideProvider(OutboundClient)
    .useValue(new OutboundClient({ allowPrivate: settings.allowPrivateUrls, fetchTimeoutMs: settings.fetchTimeoutS * 1000, callbackRetryDelaysMs: [50, 100], ...opts.outbound }));
  if (opts.gpu !== 'real') builder = builder.overrideProvider(GpuProbe).useValue(opts.gpu ?? new StaticGpuProbe());
  if (opts.probe) builder = builder.overrideProvider(InputProbe).useValue(opts.probe);
  const moduleRef = await builder.compile();
  const app = moduleRef.createNestApplication<NestExpressApplication>({ bodyParser: false, logger: false });
  // every test server's real traffic is checked against /openapi.json when its app closes, as a validating proxy would
  // (a test that passes `traffic` checks its own; KILN_OPENAPI_TRAFFIC=0 turns the check off for a local run)
  const audit = !opts.traffic && opts.openapiAudit !== false && process.env.KILN_OPENAPI_TRAFFIC !== '0' ? [] as Exchange[] : undefined;
  const traffic = opts.traffic ?? audit;
  if (traffic) recordTraffic(app, traffic);
  configureApp(app, settings, TOKEN);
  await app.init();
  await app.listen(0, '127.0.0.1');
  const url = await app.getUrl();
  return {
    app,
    http: request(app.getHttpServer()),
    url: url.replace('[::1]', '127.0.0.1'),
    dataDir,
    settings,
    scheduler: app.get(Scheduler),
    jobs: app.get(JobsService),
    async close(removeData = false) {
      const doc = audit && (await (await fetch(`${url.replace('[::1]', '127.0.0.1')}/openapi.json`)).json());
      await app.close();
      if (removeData) rmSync(dataDir, { recursive: true, force: true });
      const problems = audit ? await openapiProblems(doc as object, audit) : [];
      if (problems.length) throw new Error(`openapi audit (test/api/harness.ts): responses unlike /openapi.json:\n${problems.join('\n')}`);
    },
  };
}

/** The app with the built-in models on their demo checkpoints: WEIGHTS_DIR is an empty temp folder (so no real
 * checkpoint is found, whatever ./weights holds), removed with the data dir on close(true). */
export async function startAppOnDemoWeights(opts: TestAppOptions = {}): Promise<TestApp> {
  const weights = mkdtempSync(join(tmpdir(), 'kiln-no-weights-'));
  const t = await startApp({ ...opts, env: { ...opts.env, WEIGHTS_DIR: weights } });
  return {
    ...t,
    async close(removeData = false) {
      await t.close(removeData);
      rmSync(weights, { recursive: true, force: true });
    },
  };
}

export const auth = { Authorization: `Bearer ${TOKEN}` };

/** Polls GET /api/jobs/:id until `pred` holds (tests only; the service itself never polls). */
export async function until(t: TestApp, id: string, pred: (job: Record<string, any>) => boolean, timeoutMs = 10_000): Promise<Record<string, any>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const res = await t.http.get(`/api/jobs/${id}`).set(auth);
    if (res.status === 200 && pred(res.body)) return res.body;
    if (Date.now() > end) throw new Error(`until: job ${id} never matched; last: ${res.status} ${JSON.stringify(res.body)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** How many jobs the store holds (GET /api/jobs' X-Total-Count). */
export async function jobCount(t: TestApp): Promise<number> {
  return Number((await t.http.get('/api/jobs').set(auth)).headers['x-total-count']);
}

/** GET /api/config once the worker serves `profile` (its LoRA list matched against the worker's models), or after a
 * minute whatever it says. */
export async function configOnceServed(t: TestApp, profile: string): Promise<Record<string, any>> {
  for (const end = Date.now() + 60_000; ; await new Promise((r) => setTimeout(r, 100))) {
    const c = (await t.http.get('/api/config').set(auth)).body;
    if (c.profiles.find((p: { profile: string }) => p.profile === profile)?.available || Date.now() > end) return c;
  }
}
