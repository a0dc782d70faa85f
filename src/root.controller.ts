import { Controller, Get, Header } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from './paths';

export const clientDist = () => join(projectRoot(), 'client', 'dist');

const PLACEHOLDER = `<!doctype html><html lang="en"><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Kiln</title><body style="font-family:sans-serif;max-width:40em;margin:2em auto;padding:0 1em">
<h1>Kiln</h1><p>The web page is not built. Run <code>npm run build</code>, or use the API: see <a href="/docs">/docs</a>.</p></body></html>`;

/** GET /: the bundled web page (client/dist), or a short page saying it is not built. */
@ApiTags('service')
@Controller()
export class RootController {
  @Get()
  @ApiOperation({ summary: 'The bundled web page (no credential)', security: [] })
  @ApiOkResponse({ description: 'HTML', content: { 'text/html': { schema: { type: 'string' } } } })
  @ApiResponse({ status: 304, description: 'Not modified: the page a browser holds is current (a conditional GET), no body' })
  @Header('Content-Type', 'text/html; charset=utf-8')
  @Header('Cache-Control', 'no-cache')
  index(): string {
    const file = join(clientDist(), 'index.html');
    return existsSync(file) ? readFileSync(file, 'utf8') : PLACEHOLDER;
  }
}
