import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

// OpenAPI schemas of the response bodies (documentation only; the job object is built by toJobObject).

class ProgressDto {
  @ApiProperty({ type: 'integer' }) value!: number;
  @ApiProperty({ type: 'integer' }) max!: number;
}

export class LoraDto {
  @ApiProperty({ description: 'The LoRA file\'s name: its path below LORA_DIR or ComfyUI\'s loras/ without .safetensors (GET /api/config lists them)' }) name!: string;
  @ApiProperty({ description: 'Strength: 1 as trained, 0 off' }) scale!: number;
}

export class JobObjectDto {
  @ApiProperty({ example: '20261121_101530_0427', description: 'Date, time and a short numeric suffix joined by underscores' }) id!: string;
  @ApiProperty({ enum: ['video', 'image'] }) kind!: string;
  @ApiProperty({ enum: ['queued', 'running', 'done', 'failed'] }) status!: string;
  @ApiProperty() prompt!: string;
  @ApiPropertyOptional({ description: 'Extension, video jobs with image_mode reference: the text the model is given, the prompt with a "<Picture n> is a reference image: ..." line in front for each picture it does not name, then a "<Audio n> is the voice-timbre reference ..." line for each voice (audio_mode voice) it does not name (the prompt itself when it names them all)' }) model_prompt?: string;
  @ApiProperty() profile!: string;
  @ApiProperty({ enum: ['t2v', 'i2v', 't2i', 'edit'], description: 'Style-reference image jobs report t2i' }) mode!: string;
  @ApiProperty() aspect!: string;
  @ApiProperty() res!: string;
  @ApiProperty({ example: '864x480' }) size!: string;
  @ApiPropertyOptional({ description: 'Video jobs' }) seconds?: number;
  @ApiPropertyOptional({ type: 'integer', description: 'Video jobs: frame count after snapping to 17k+5' }) frames?: number;
  @ApiProperty({ type: 'integer' }) seed!: number;
  @ApiProperty({ type: 'integer' }) steps!: number;
  @ApiProperty({ type: 'integer' }) image_count!: number;
  @ApiProperty({ description: 'Unix seconds' }) created!: number;
  @ApiPropertyOptional({ type: 'integer', description: 'Queued: 1 = next to run' }) position?: number;
  @ApiPropertyOptional({ type: ProgressDto, description: 'Running: sampling-step progress' }) progress?: ProgressDto;
  @ApiPropertyOptional({ enum: ['加载模型', '加载文本编码器', '编码提示词/图片', '采样', '视频解码', '音频解码', '封装', '保存'] }) stage?: string;
  @ApiPropertyOptional({ description: 'Running: seconds so far' }) elapsed?: number;
  @ApiPropertyOptional({ description: 'Done: generation seconds, excluding queue time' }) exec_s?: number;
  @ApiPropertyOptional({ example: '/out/20261121_101530_0427.mp4' }) video?: string;
  @ApiPropertyOptional({ example: '/api/jobs/20261121_101530_0427/video' }) video_download?: string;
  @ApiPropertyOptional({ example: '/out/20261121_101530_0427.png' }) image?: string;
  @ApiPropertyOptional({ example: '/api/jobs/20261121_101530_0427/image' }) image_download?: string;
  @ApiPropertyOptional({ description: 'Image jobs' }) negative?: string;
  @ApiPropertyOptional({ description: 'Image jobs' }) cfg?: number;
  @ApiPropertyOptional({ description: 'Image jobs' }) size_from_ref?: boolean;
  @ApiPropertyOptional({ type: [LoraDto], description: 'Extension, image jobs with LoRAs: the LoRAs it ran with, by name and scale, in order (docs/loras.md)' }) loras?: LoraDto[];
  @ApiPropertyOptional({ description: 'Done or failed: Unix seconds' }) finished?: number;
  @ApiPropertyOptional({ description: 'Failed: the reason ("cancelled", "interrupted", "interrupted by restart", or what went wrong)' }) error?: string;
  @ApiPropertyOptional({ type: 'integer', description: 'HTTP status the callback target returned' }) callback_status?: number;
  @ApiPropertyOptional({ type: 'integer', minimum: 0, maximum: 9, description: 'Extension: higher runs first (5 unless the request set it)' }) priority?: number;
  @ApiPropertyOptional({ description: 'Extension, queued and running: expected seconds until the job finishes (measured runtimes of its class on this machine, the queue ahead, model loads)' }) eta_s?: number;
  @ApiPropertyOptional({ description: 'Extension: the GPU worker (WORKER_NAME) the job went to, once it started' }) worker?: string;
  @ApiPropertyOptional({ description: 'Extension, done and failed with OUTPUT_TTL_S set: Unix seconds when the job and its file are deleted' }) expires_at?: number;
}

export class DeleteResultDto {
  @ApiProperty() id!: string;
  @ApiProperty({ enum: ['cancelled', 'interrupted', 'deleted'] }) action!: string;
}
