import { DynamicModule, Module, Provider } from '@nestjs/common';
import { APP_FILTER, APP_GUARD, APP_PIPE } from '@nestjs/core';
import type { Logger } from 'pino';
import { API_TOKEN, TokenGuard } from './auth/token.guard';
import { HttpExceptionFilter } from './http/http-exception.filter';
import { LOGGER } from './http/tokens';
import { ApiValidationPipe } from './http/validation';
import { SETTINGS, Settings } from './config/settings';
import { GpuProbe, WorkerGpuProbe } from './health/gpu.probe';
import { HealthController } from './health/health.controller';
import { HealthService } from './health/health.service';
import { ImageController } from './image/image.controller';
import { ImageService } from './image/image.service';
import { LoraLibrary } from './loras/lora-library';
import { CallbackSender } from './jobs/callback.sender';
import { TTS_PROFILE } from './catalog';
import { InputProbe } from './jobs/input-probe';
import { JobStore } from './jobs/job.store';
import { EventsController } from './jobs/events.controller';
import { EventStreams } from './jobs/event-streams';
import { IdempotencyInterceptor } from './jobs/idempotency.interceptor';
import { RetentionSweeper } from './jobs/retention';
import { JobEvents } from './jobs/job.events';
import { JobFiles } from './jobs/job.files';
import { JobWaiters } from './jobs/job.waiters';
import { JobsController } from './jobs/jobs.controller';
import { JobInputs } from './jobs/job.inputs';
import { JobsService } from './jobs/jobs.service';
import { FitCheck } from './jobs/fit-check';
import { MediaInputProbe } from './jobs/media-input-probe';
import { OutboundClient } from './net/outbound';
import { RootController } from './root.controller';
import { OpenAiModelsController } from './openai/openai.controller';
import { OpenAiImagesController } from './openai/images.controller';
import { OpenAiSpeechController } from './openai/speech.controller';
import { OpenAiImagesService } from './openai/images.service';
import { OpenAiSpeechService } from './openai/speech.service';
import { VoiceStore } from './tts/voices.store';
import { OpenAiVideosController } from './openai/videos.controller';
import { OpenAiVideosService } from './openai/videos.service';
import { RemixStore } from './openai/remixes.store';
import { EtaModel } from './scheduler/eta';
import { LocalWorker } from './scheduler/local-worker';
import { RedisFleet } from './scheduler/redis-fleet';
import { WorkerKeeper } from './scheduler/worker-keeper';
import type { WorkerPool } from './scheduler/worker-link';
import { S3Store } from './storage/s3-store';
import { KilnMetrics } from './metrics/metrics';
import { MetricsController } from './metrics/metrics.controller';
import { Scheduler } from './scheduler/scheduler';
import { TtsController } from './tts/tts.controller';
import { TtsService } from './tts/tts.service';
import { VideoController } from './video/video.controller';
import { VideoService } from './video/video.service';
import { Planner } from './plan/planner';
import type { PipelineModule } from './worker/protocol';

export interface AppDeps {
  settings: Settings;
  token: string;
  log: Logger;
  /** What the local GPU worker serves besides or instead of the built-in models (tests, benches). */
  worker?: { pipelines?: PipelineModule[]; builtins?: boolean };
}

/** The GPU workers the scheduler routes to: the one this API starts (QUEUE=local, WORKERS=local), once it said
 * hello (or 30 s passed); the fleet on Redis (QUEUE=redis), with a worker of this API's own in it when WORKERS=local;
 * or none (QUEUE=local, WORKERS=none). */
const WORKER_POOL = Symbol('WORKER_POOL');

/** The environment a worker of this API's own needs to join the fleet: the cluster settings. */
function fleetEnv(s: Settings): Record<string, string> {
  const env: Record<string, string> = { REDIS_URL: s.cluster.redisUrl!, WORKER_STALL_S: String(s.workerStallS), STORAGE: s.cluster.s3 ? 's3' : 'local' };
  const s3 = s.cluster.s3;
  if (s3) {
    Object.assign(env, { S3_BUCKET: s3.bucket, S3_REGION: s3.region, S3_FORCE_PATH_STYLE: s3.forcePathStyle ? '1' : '0' });
    if (s3.endpoint) env.S3_ENDPOINT = s3.endpoint;
    if (s3.accessKeyId) Object.assign(env, { S3_ACCESS_KEY_ID: s3.accessKeyId, S3_SECRET_ACCESS_KEY: s3.secretAccessKey! });
  }
  return env;
}

/** Everything is built from the one validated Settings object. Tests swap providers (pipelines, probes) with
 * Test.createTestingModule(...).overrideProvider. */
@Module({})
export class AppModule {
  static forRoot({ settings, token, log, worker }: AppDeps): DynamicModule {
    const providers: Provider[] = [
      { provide: SETTINGS, useValue: settings },
      { provide: LOGGER, useValue: log },
      { provide: API_TOKEN, useValue: token },
      { provide: JobStore, useFactory: () => new JobStore(settings.dataDir) },
      {
        provide: WORKER_POOL,
        useFactory: async (): Promise<WorkerPool | null> => {
          const own = {
            dataDir: settings.dataDir, weightsDir: settings.weightsDir, hubCacheDir: settings.hubCacheDir, demoWeightsDir: settings.demoWeightsDir, cacheDir: settings.cacheDir ?? null, demoVideo: settings.demoVideo, logLevel: settings.logLevel,
            nice: settings.workerNice, log, pipelines: worker?.pipelines, builtins: worker?.builtins,
          };
          if (settings.cluster.queue === 'redis') {
            const fleet = new RedisFleet({ url: settings.cluster.redisUrl!, stallS: settings.workerStallS, log });
            if (settings.workers === 'local') fleet.keep(new WorkerKeeper({ ...own, env: fleetEnv(settings) }));
            await fleet.start();
            return fleet;
          }
          if (settings.workers === 'none') return null;
          const budget = settings.gpuMemoryBudgetBytes !== undefined ? { env: { GPU_MEMORY_BUDGET: String(settings.gpuMemoryBudgetBytes) } } : {};
          const link = new LocalWorker({ ...own, ...budget, stallS: settings.workerStallS, busyS: settings.workerBusyS });
          await link.start();
          return link;
        },
      },
      { provide: S3Store, useFactory: async () => {
        if (!settings.cluster.s3) return null;
        const store = new S3Store(settings.cluster.s3);
        await store.ensureBucket();
        return store;
      } },
      {
        provide: Scheduler,
        useFactory: (pool: WorkerPool | null, store: JobStore) =>
          new Scheduler(pool ?? undefined, {
            interactive: (task) => task.kind === 'tts' && task.profile === TTS_PROFILE,
            interruptGraceS: settings.interruptGraceS,
            maxJobS: settings.maxJobS,
            eta: new EtaModel(store.runtimes),
            log: (msg, extra) => log.warn(extra ?? {}, msg),
          }),
        inject: [WORKER_POOL, JobStore],
      },
      JobWaiters,
      JobEvents,
      EventStreams,
      JobFiles,
      IdempotencyInterceptor,
      RetentionSweeper,
      { provide: OutboundClient, useFactory: () => new OutboundClient({ allowPrivate: settings.allowPrivateUrls, fetchTimeoutMs: settings.fetchTimeoutS * 1000 }) },
      {
        provide: CallbackSender,
        useFactory: (o: OutboundClient, s: JobStore, m: KilnMetrics) =>
          new CallbackSender(o, s, s.deliveries, log, { secret: settings.webhookSecret, maxAgeS: settings.callbackMaxAgeS, onOutcome: (outcome) => m.callback(outcome) }),
        inject: [OutboundClient, JobStore, KilnMetrics],
      },
      { provide: KilnMetrics, useFactory: (s: Scheduler) => new KilnMetrics(s), inject: [Scheduler] },
      { provide: InputProbe, useClass: MediaInputProbe },
      { provide: GpuProbe, useFactory: (s: Scheduler) => new WorkerGpuProbe(s), inject: [Scheduler] },
      JobsService,
      JobInputs,
      FitCheck,
      // dry_run's plans, in child processes (the API never loads the engine)
      { provide: Planner, useFactory: (g: GpuProbe) => new Planner({ budgetBytes: settings.gpuMemoryBudgetBytes, gpu: () => g.describe() }), inject: [GpuProbe] },
      VideoService,
      ImageService,
      LoraLibrary,
      TtsService,
      OpenAiImagesService,
      OpenAiSpeechService,
      VoiceStore,
      OpenAiVideosService,
      RemixStore,
      HealthService,
      { provide: APP_GUARD, useClass: TokenGuard },
      { provide: APP_PIPE, useClass: ApiValidationPipe },
      { provide: APP_FILTER, useFactory: () => new HttpExceptionFilter(log) },
    ];
    return {
      module: AppModule,
      controllers: [VideoController, ImageController, TtsController, JobsController, EventsController, HealthController, MetricsController, RootController, OpenAiModelsController, OpenAiImagesController, OpenAiSpeechController, OpenAiVideosController],
      providers,
      exports: [Scheduler, JobsService],
    };
  }
}
