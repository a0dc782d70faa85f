import { Controller, Get } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiCommon } from '../http/api-docs';
import { HealthService } from './health.service';

@ApiTags('service')
@ApiCommon()
@Controller('api')
export class HealthController {
  constructor(private readonly health: HealthService) {}

  @Get('status')
  @ApiOperation({ summary: 'Whether the generation backend is online, the current job id, the number queued' })
  @ApiOkResponse({ schema: { type: 'object', properties: { online: { type: 'boolean' }, current_job: { type: 'string', nullable: true }, queued: { type: 'integer' } } } })
  status() {
    return this.health.status();
  }

  @Get('config')
  @ApiOperation({ summary: 'Profiles (kind, default steps, description, accepted inputs, real or demo weights), size tables, durations' })
  @ApiOkResponse({ schema: { type: 'object', additionalProperties: true } })
  config() {
    return this.health.config();
  }

  @Get('health')
  @ApiOperation({ summary: 'Machine health: GPU, CPU, RAM, disk, services, current job, VPN (null), source revision, watchdog' })
  @ApiOkResponse({ schema: { type: 'object', additionalProperties: true } })
  healthz() {
    return this.health.health();
  }
}
