import { DynamicModule, Module, Provider } from '@nestjs/common';
import { APP_FILTER, APP_GUARD, APP_PIPE } from '@nestjs/core';
import type { Logger } from 'pino';
import { API_TOKEN, TokenGuard } from './auth/token.guard';
import { HttpExceptionFilter } from './common/http-exception.filter';
import { LOGGER } from './common/tokens';
import { ApiValidationPipe } from './common/validation';
import { SETTINGS, Settings } from './config/settings';
import { GpuProbe, WorkerGpuProbe } from './health/gpu.probe';
import { HealthController } from './health/health.controller';
import { HealthService } from './health/health.service';
import { ImageController } from './image/image.controller';
import { ImageService } from './image/image.service';
import { CallbackSender } from './jobs/callback.sender';
import { TTS_PROFILE } from './catalog';
import { InputProbe } from './jobs/input-probe';
import { JobStore } from './jobs/job.store';
import { EventsController } from './jobs/events.controller';
import { IdempotencyInterceptor } from './jobs/idempotency.interceptor';
import { RetentionSweeper } from './jobs/retention';
import { JobEvents } from './jobs/job.events';
import { JobWaiters } from './jobs/job.waiters';
import { JobsController } from './jobs/jobs.controller';
import { JobsService } from './jobs/jobs.service';
import { MediaInputProbe } from './jobs/media-input-probe';
import { OutboundClient } from './net/outbound';
import { RootController } from './root.controller';
import { EtaModel } from './scheduler/eta';
import { LocalWorker } from './scheduler/local-worker';
import { KilnMetrics } from './metrics/metrics';
import { MetricsController } from './metrics/metrics.controller';
import { Scheduler } from './scheduler/scheduler';
import { TtsController } from './tts/tts.controller';
import { TtsService } from './tts/tts.service';
import { VideoController } from './video/video.controller';
import { VideoService } from './video/video.service';
import type { PipelineModule } from './worker/protocol';

export interface AppDeps {
  settings: Settings;
  token: string;
  log: Logger;
  /** What the local GPU worker serves besides or instead of the built-in models (tests, benches). */
  worker?: { pipelines?: PipelineModule[]; builtins?: boolean };
}

/** The GPU worker this API starts (WORKERS=local), once it said hello (or 30 s passed), or none (WORKERS=none). */
const WORKER_LINK = Symbol('WORKER_LINK');

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
        provide: WORKER_LINK,
        useFactory: async () => {
          if (settings.workers === 'none') return null;
          const link = new LocalWorker({
            dataDir: settings.dataDir, weightsDir: settings.weightsDir, demoWeightsDir: settings.demoWeightsDir, logLevel: settings.logLevel,
            stallS: settings.workerStallS, nice: settings.workerNice, log, pipelines: worker?.pipelines, builtins: worker?.builtins,
          });
          await link.start();
          return link;
        },
      },
      {
        provide: Scheduler,
        useFactory: (link: LocalWorker | null, store: JobStore) =>
          new Scheduler(link ?? undefined, {
            interactive: (task) => task.kind === 'tts' && task.profile === TTS_PROFILE,
            interruptGraceS: settings.interruptGraceS,
            maxJobS: settings.maxJobS,
            eta: new EtaModel(store.runtimes),
            log: (msg, extra) => log.warn(extra ?? {}, msg),
          }),
        inject: [WORKER_LINK, JobStore],
      },
      JobWaiters,
      JobEvents,
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
      VideoService,
      ImageService,
      TtsService,
      HealthService,
      { provide: APP_GUARD, useClass: TokenGuard },
      { provide: APP_PIPE, useClass: ApiValidationPipe },
      { provide: APP_FILTER, useFactory: () => new HttpExceptionFilter(log) },
    ];
    return {
      module: AppModule,
      controllers: [VideoController, ImageController, TtsController, JobsController, EventsController, HealthController, MetricsController, RootController],
      providers,
      exports: [Scheduler, JobsService],
    };
  }
}
