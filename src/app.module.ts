import { DynamicModule, Injectable, Module, OnApplicationShutdown, Provider } from '@nestjs/common';
import { APP_FILTER, APP_GUARD, APP_PIPE } from '@nestjs/core';
import type { Logger } from 'pino';
import { API_TOKEN, TokenGuard } from './auth/token.guard';
import { HttpExceptionFilter } from './common/http-exception.filter';
import { LOGGER } from './common/tokens';
import { ApiValidationPipe } from './common/validation';
import { SETTINGS, Settings } from './config/settings';
import { EngineHolder } from './engine/engine';
import { EngineGpuProbe, GpuProbe } from './health/gpu.probe';
import { HealthController } from './health/health.controller';
import { HealthService } from './health/health.service';
import { ImageController } from './image/image.controller';
import { imagePipelinesProvider } from './image/image.pipeline';
import { ImageService } from './image/image.service';
import { CallbackSender } from './jobs/callback.sender';
import { findProfile } from './catalog';
import { InputProbe } from './jobs/input-probe';
import { JobStore } from './jobs/job.store';
import { JobWaiters } from './jobs/job.waiters';
import { JobsController } from './jobs/jobs.controller';
import { JobsService } from './jobs/jobs.service';
import { MediaInputProbe } from './jobs/media-input-probe';
import { OutboundClient } from './net/outbound';
import { RootController } from './root.controller';
import { PipelineRegistry } from './scheduler/pipeline';
import { Scheduler } from './scheduler/scheduler';
import { TtsController } from './tts/tts.controller';
import { ttsPipelineProvider } from './tts/tts.pipeline';
import { TtsService } from './tts/tts.service';
import { VideoController } from './video/video.controller';
import { videoPipelinesProvider } from './video/video.pipeline';
import { VideoService } from './video/video.service';

/** The engine never imports Nest, so its shutdown is hooked here: a live device keeps Node from exiting. */
@Injectable()
class EngineShutdown implements OnApplicationShutdown {
  constructor(private readonly holder: EngineHolder) {}
  onApplicationShutdown(): void {
    this.holder.destroy();
  }
}

/** "profile fastvid: the MiniMax H3 model is not built into this service yet" */
function missingModel(task: { kind: string; profile: string }): string {
  const model = task.kind === 'video' || task.kind === 'image' ? findProfile(task.kind, task.profile)?.model : 'Qwen3-TTS';
  return `profile ${task.profile}: the ${model ?? task.kind} model is not built into this service yet, so it cannot run ${task.kind} jobs`;
}

export interface AppDeps {
  settings: Settings;
  token: string;
  log: Logger;
}

/** Everything is built from the one validated Settings object. Tests swap providers (pipelines, probes) with
 * Test.createTestingModule(...).overrideProvider. */
@Module({})
export class AppModule {
  static forRoot({ settings, token, log }: AppDeps): DynamicModule {
    const providers: Provider[] = [
      { provide: SETTINGS, useValue: settings },
      { provide: LOGGER, useValue: log },
      { provide: API_TOKEN, useValue: token },
      { provide: JobStore, useFactory: () => new JobStore(settings.dataDir) },
      { provide: PipelineRegistry, useFactory: () => new PipelineRegistry() },
      {
        provide: Scheduler,
        // Speech may load beside a loaded model only when the engine's memory budget says it fits.
        useFactory: (r: PipelineRegistry, h: EngineHolder) =>
          new Scheduler(r, (msg, extra) => log.warn(extra ?? {}, msg), missingModel, (bytes) => h.peek()?.canFit(bytes) ?? false),
        inject: [PipelineRegistry, EngineHolder],
      },
      JobWaiters,
      { provide: OutboundClient, useFactory: () => new OutboundClient({ allowPrivate: settings.allowPrivateUrls, fetchTimeoutMs: settings.fetchTimeoutS * 1000 }) },
      { provide: CallbackSender, useFactory: (o: OutboundClient, s: JobStore) => new CallbackSender(o, s, log), inject: [OutboundClient, JobStore] },
      { provide: InputProbe, useClass: MediaInputProbe },
      { provide: EngineHolder, useFactory: () => new EngineHolder() },
      EngineShutdown,
      { provide: GpuProbe, useFactory: (h: EngineHolder) => new EngineGpuProbe(() => h.get()), inject: [EngineHolder] },
      JobsService,
      VideoService,
      ImageService,
      TtsService,
      ttsPipelineProvider,
      videoPipelinesProvider,
      imagePipelinesProvider,
      HealthService,
      { provide: APP_GUARD, useClass: TokenGuard },
      { provide: APP_PIPE, useClass: ApiValidationPipe },
      { provide: APP_FILTER, useFactory: () => new HttpExceptionFilter(log) },
    ];
    return {
      module: AppModule,
      controllers: [VideoController, ImageController, TtsController, JobsController, HealthController, RootController],
      providers,
      exports: [PipelineRegistry, Scheduler, JobsService, EngineHolder],
    };
  }
}
