import type { NestExpressApplication } from '@nestjs/platform-express';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import express from 'express';
import { join } from 'node:path';
import type { Settings } from './config/settings';
import { inlineRequestBodies } from './http/openapi-inline';
import { JobFiles } from './jobs/job.files';
import { JobStore } from './jobs/job.store';
import { expiredText } from './jobs/jobs.service';
import { requestGate } from './http/request-gate';
import { clientDist } from './root.controller';

function bodyErrors(err: { type?: string; message?: string; limit?: number }, _req: express.Request, res: express.Response, next: express.NextFunction): void {
  if (err?.type === 'entity.parse.failed') {
    res.status(422).json({ detail: [{ loc: ['body', 0], msg: `JSON decode error: ${err.message}`, type: 'json_invalid', input: {} }] });
  } else if (err?.type === 'entity.too.large') {
    res.status(413).json({ detail: `request body is larger than ${Math.round((err.limit ?? 0) / 1048576)} MB` });
  } else if (err?.type === 'encoding.unsupported' || err?.type === 'charset.unsupported') {
    res.status(415).json({ detail: err.message });
  } else next(err);
}

/** HTTP set-up shared by main.ts and the e2e tests: body limits, CORS, /out, the web page's assets, OpenAPI. */
export function configureApp(app: NestExpressApplication, settings: Settings, token: string): void {
  // Before any body is read: no compressed bodies, and no body at all into /api without the token.
  app.use(requestGate(token));
  // JSON bodies parsed here rather than by Nest, whose own parser turns a syntax error into a bare 400:
  // a malformed body is a 422 json_invalid (the spec's validation object), an oversized one a 413.
  app.use(express.json({ limit: `${settings.maxBodyMb}mb`, inflate: false }));
  app.use(express.urlencoded({ extended: false, limit: '1mb', inflate: false }));
  app.use(bodyErrors);
  // Any origin may call the API (the spec); credentials travel in headers, never cookies.
  app.enableCors({
    origin: true,
    methods: ['GET', 'POST', 'DELETE', 'OPTIONS'],
    allowedHeaders: ['Authorization', 'x-token', 'Content-Type', 'Idempotency-Key', 'Last-Event-ID'],
    exposedHeaders: ['X-Total-Count', 'Content-Disposition'],
    maxAge: 600,
  });
  // Finished files, no credential. Only completed files exist under their final names (temp + rename). With
  // STORAGE=s3 they are streamed through from the object store, at the same paths.
  if (settings.cluster.s3) {
    app.use('/out', (req: express.Request, res: express.Response, next: express.NextFunction) => {
      const file = /^\/([\w-]+\.(png|mp4|wav))$/.exec(req.path)?.[1];
      if (!file || (req.method !== 'GET' && req.method !== 'HEAD')) return next();
      // one byte range as express.static serves them locally (a browser seeking in an mp4); several: the whole file
      const range = /^bytes=\d*-\d*$/.test(req.headers.range ?? '') ? req.headers.range : undefined;
      app.get(JobFiles).open(file, range).then((o) => {
        if (!o) return next();
        res.setHeader('Accept-Ranges', 'bytes');
        if ('unsatisfiable' in o) return void res.status(416).setHeader('Content-Range', `bytes */${o.unsatisfiable}`).end();
        res.setHeader('Content-Type', o.type);
        if (o.size !== undefined) res.setHeader('Content-Length', String(o.size));
        if (o.range) res.status(206).setHeader('Content-Range', o.range);
        if (req.method === 'HEAD') return void (o.body.destroy(), res.end());
        o.body.on('error', () => res.destroy());
        o.body.pipe(res);
      }, next);
    });
  } else {
    app.use('/out', express.static(join(settings.dataDir, 'out'), { index: false, dotfiles: 'deny', fallthrough: true }));
    // a Range outside the file: express.static passes a 416 error on (with Content-Range), which would end as a 500
    app.use('/out', (err: { status?: number; headers?: Record<string, string> }, req: express.Request, res: express.Response, next: express.NextFunction) => {
      if (err?.status !== 416) return next(err);
      for (const [k, v] of Object.entries(err.headers ?? {})) res.setHeader(k, v);
      res.removeHeader('Content-Type'); // set for the file before the range was found outside it; no body follows
      res.status(416).end();
    });
  }
  app.use('/out', (req: express.Request, res: express.Response) => {
    // a file of a job OUTPUT_TTL_S removed: say so
    const id = /^\/([\w-]+)\.(png|mp4)$/.exec(req.path)?.[1];
    const expired = id ? app.get(JobStore).expiredAt(id) : undefined;
    res.status(404).json({ detail: expired !== undefined ? expiredText(`${req.path.slice(1)}`, expired, settings.outputTtlS) : 'no such file' });
  });
  app.use('/assets', express.static(join(clientDist(), 'assets'), { index: false, immutable: true, maxAge: '7d' }));

  const doc = new DocumentBuilder()
    .setTitle('Kiln media generation service')
    .setDescription('Video (with sound), image and voice-cloned speech jobs on one local GPU. Interface version 1.1.')
    .setVersion('1.1')
    // relative: the service's own origin, wherever it is reached (a client resolves it against the document's URL)
    .addServer('/', 'This service')
    .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <TOKEN> (recommended)' }, 'bearer')
    .addApiKey({ type: 'apiKey', in: 'header', name: 'x-token' }, 'x-token')
    .addApiKey({ type: 'apiKey', in: 'query', name: 'token' }, 'token-query')
    .build();
  const document = SwaggerModule.createDocument(app, doc);
  inlineRequestBodies(document as unknown as Record<string, unknown>);
  // /out is served by express.static, outside Nest's router: described by hand.
  document.paths['/out/{file}'] = {
    get: {
      operationId: 'getOutputFile',
      summary: 'A finished file (<id>.mp4, <id>.png, tts_<id>.wav), no credential',
      tags: ['service'],
      security: [],
      parameters: [{ name: 'file', in: 'path', required: true, schema: { type: 'string' } }],
      responses: {
        // the type the service sends for each of its file names (express.static by extension; the S3 stream the same)
        '200': { description: 'The file, as image/png, video/mp4 or audio/wav by its name', content: Object.fromEntries(['image/png', 'video/mp4', 'audio/wav'].map((t) => [t, { schema: { type: 'string', format: 'binary' } }])) },
        '206': { description: 'The byte range asked for with Range (a player seeking in an mp4)', content: Object.fromEntries(['image/png', 'video/mp4', 'audio/wav'].map((t) => [t, { schema: { type: 'string', format: 'binary' } }])) },
        '404': { description: 'No such file', content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorDetailDto' } } } },
        '416': { description: 'The Range asked for lies outside the file; Content-Range says its size (bytes */<size>)' },
        '304': { description: 'Not modified: the file a browser holds is current (a conditional GET), no body' },
      },
    },
  };
  SwaggerModule.setup('docs', app, document, { jsonDocumentUrl: 'openapi.json', yamlDocumentUrl: 'openapi.yaml' });
  // Polling clients keep connections open; Node's 5 s default closes them under a client about to reuse the
  // socket (seen as "fetch failed" on a POST after a pause). Outlive common client idle timeouts instead.
  const server = app.getHttpServer() as import('node:http').Server;
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  app.enableShutdownHooks();
}
