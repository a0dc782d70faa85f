import { applyDecorators } from '@nestjs/common';
import { ApiExtraModels, ApiOkResponse, ApiProperty, ApiServiceUnavailableResponse, getSchemaPath } from '@nestjs/swagger';
import { ErrorDetailDto } from '../http/error-bodies';
import { JobObjectDto } from './job.schema';

// OpenAPI schema of a dry run's answer (documentation only; the object is plan/plan.ts's JobPlan, built in the
// planner's child process, src/plan/planner.ts, with dry_run: true).

class PlanAdapterDto {
  @ApiProperty({ example: 'h200', description: 'The adapter profile the plan stands for (src/engine/plan-device.ts)' }) id!: string;
  @ApiProperty({ example: 'NVIDIA H200' }) name!: string;
}

class PlanStageDto {
  @ApiProperty({ example: '采样', description: 'The spec\'s stage name' }) stage!: string;
  @ApiProperty({ type: 'integer', description: 'Peak GPU bytes while the stage ran' }) peak_gpu_bytes!: number;
  @ApiProperty({ type: 'integer', description: 'GPU bytes held when the stage ended (after a load stage: what it left resident)' }) held_gpu_bytes!: number;
  @ApiProperty() flops!: number;
  @ApiProperty({ description: 'Bytes read and written by its kernels' }) bytes!: number;
  @ApiProperty({ type: 'integer' }) dispatches!: number;
  @ApiProperty({ type: 'integer', description: 'Sampling steps in the stage' }) steps!: number;
}

class PlanResidentDto {
  @ApiProperty() stage!: string;
  @ApiProperty({ type: 'integer' }) bytes!: number;
}

class PlanPerStepDto {
  @ApiProperty() flops!: number;
  @ApiProperty() bytes!: number;
  @ApiProperty() dispatches!: number;
  @ApiProperty({ type: 'object', additionalProperties: true, description: 'The same per rate class (gemm-small, gemm-medium, gemm-large, attention, conv, memory; the classes with work): { flops, bytes, dispatches } each' }) by_class!: Record<string, unknown>;
  @ApiProperty({ type: 'array', items: { type: 'object', additionalProperties: true }, description: 'The step\'s GEMM and attention shapes, most FLOPs first: { shape, calls, flops, share }' }) shapes!: Record<string, unknown>[];
}

class PlanOffloadDto {
  @ApiProperty({ type: [String], description: 'What is streamed from host memory: transformer_blocks (a video job\'s DiT blocks while sampling), text_encoder_layers (its text encoder\'s layers while encoding)' }) streamed!: string[];
  @ApiProperty({ description: 'Host-to-GPU bytes per sampling step' }) host_to_gpu_bytes_per_step!: number;
  @ApiProperty({ description: 'The residency policy, its parts joined by +: resident (nothing moved), blocks-streamed, dit-on-host-while-encoding (a video job\'s DiT while its text encoder is on the GPU, when both would exceed the budget), text-encoder-streamed (its layers uploaded in turn, when the whole encoder does not fit)' }) policy!: string;
  @ApiProperty({ description: 'Host-to-GPU bytes the policy costs once per job (the DiT uploaded again, the text encoder\'s streamed layers)' }) host_to_gpu_bytes_per_job!: number;
  @ApiProperty() note!: string;
}

export class JobPlanDto {
  @ApiProperty({ enum: [true], description: 'Extension: the answer to "dry_run": true, a plan and not a job; nothing was queued or stored' }) dry_run!: boolean;
  @ApiProperty({ enum: ['video', 'image', 'tts'] }) kind!: string;
  @ApiProperty() profile!: string;
  @ApiProperty() model!: string;
  @ApiProperty({ type: PlanAdapterDto }) adapter!: PlanAdapterDto;
  @ApiProperty({ type: 'object', additionalProperties: true, description: 'What the plan ran: the drafted job\'s sizes and settings (width, height, steps, frames, seconds, cfg, images, audios, modes)' }) job!: Record<string, unknown>;
  @ApiProperty({ type: 'integer', description: 'Peak GPU bytes of the whole job' }) peak_gpu_bytes!: number;
  @ApiProperty({ type: 'integer', description: 'The budget the plan was checked against: GPU_MEMORY_BUDGET, else the adapter\'s memory less 5 %' }) budget_bytes!: number;
  @ApiProperty({ description: 'peak_gpu_bytes <= budget_bytes' }) fits!: boolean;
  @ApiProperty({ type: [PlanStageDto] }) stages!: PlanStageDto[];
  @ApiProperty({ type: [PlanResidentDto], description: 'Bytes each load stage left resident' }) resident!: PlanResidentDto[];
  @ApiProperty() flops!: number;
  @ApiProperty() bytes!: number;
  @ApiProperty({ type: 'integer' }) dispatches!: number;
  @ApiProperty({ type: PlanPerStepDto, nullable: true, description: 'One sampling step\'s share' }) per_step!: PlanPerStepDto | null;
  @ApiProperty({ type: 'object', additionalProperties: true, description: '{ "step_s", "sampling_s", "by_class", "basis" } from the tuning table\'s measured rates, else { "sampling_s", "basis" } where the profile has a measured whole-step rate, else { "none": why }' }) predicted!: Record<string, unknown>;
  @ApiProperty({ type: PlanOffloadDto }) offload!: PlanOffloadDto;
  @ApiProperty({ type: [String] }) notes!: string[];
}

/** The dry_run field's description (the JSON create forms). */
export const DRY_RUN_DESCRIPTION = 'Extension: true answers the job\'s plan (peak GPU memory per stage, FLOPs, dispatches; what npm run plan -- \'<json>\' --json prints) instead of creating it: the request is checked as a create checks it (the same 400s), its inputs fetched and probed, and nothing is queued or stored. A plan runs in a child process: a few seconds for an image, up to about 40 s for a 768p 10 s video on a small CPU; answers are kept, so the same request again is answered at once. 429 while the planner is busy, 503 past its time limit';

/** A JSON create that takes "dry_run" (src/plan/planner.ts): its 200 is the job, or with dry_run its plan; 503 when
 * the plan ran past its time limit. */
export const ApiJobOrPlan = () =>
  applyDecorators(
    ApiExtraModels(JobObjectDto, JobPlanDto),
    ApiOkResponse({ description: 'The job as created; with "dry_run": true its plan (JobPlanDto), and nothing created', schema: { oneOf: [{ $ref: getSchemaPath(JobObjectDto) }, { $ref: getSchemaPath(JobPlanDto) }] } }),
    ApiServiceUnavailableResponse({ description: 'dry_run: the plan took longer than its time limit', type: ErrorDetailDto }),
  );
