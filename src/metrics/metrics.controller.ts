import { Controller, Get, HttpException, HttpStatus, Inject, Req, Res } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiSecurity, ApiTags, ApiUnauthorizedResponse } from '@nestjs/swagger';
import { ErrorDetailDto } from '../http/error-bodies';
import type { Request, Response } from 'express';
import { API_TOKEN } from '../auth/token.guard';
import { presentedToken, tokenMatches } from '../auth/token';
import { SETTINGS, Settings } from '../config/settings';
import { KilnMetrics } from './metrics';

/** GET /metrics: the Prometheus text format; the API token is needed unless METRICS_PUBLIC=1. */
@ApiTags('service')
@Controller('metrics')
export class MetricsController {
  constructor(
    private readonly metrics: KilnMetrics,
    @Inject(SETTINGS) private readonly settings: Settings,
    @Inject(API_TOKEN) private readonly token: string,
  ) {}

  @Get()
  @ApiOperation({ summary: 'Prometheus metrics (text format): jobs, durations, queue, model loads, worker restarts, GPU memory, callbacks, process. The token as for /api unless METRICS_PUBLIC=1' })
  // the token as for /api (any one of the three places); with METRICS_PUBLIC=1 none is asked
  @ApiSecurity('bearer')
  @ApiSecurity('x-token')
  @ApiSecurity('token-query')
  @ApiOkResponse({ description: 'The Prometheus text exposition format, version 0.0.4', content: { 'text/plain': { schema: { type: 'string' } } } })
  @ApiUnauthorizedResponse({ description: 'Token missing or wrong (unless METRICS_PUBLIC=1)', type: ErrorDetailDto })
  async scrape(@Req() req: Request, @Res() res: Response): Promise<void> {
    if (!this.settings.metricsPublic) {
      const given = presentedToken(req.headers, req.query as Record<string, unknown>);
      if (given === undefined || !tokenMatches(given, this.token)) throw new HttpException({ detail: 'bad token' }, HttpStatus.UNAUTHORIZED);
    }
    res.setHeader('Content-Type', this.metrics.registry.contentType);
    res.end(await this.metrics.registry.metrics());
  }
}
