// The capability table (catalog/capabilities.ts) is the one answer to "what can a request of profile X carry": the
// OpenAPI schemas of the request bodies (made by @nestjs/swagger from the DTOs, as /openapi.json is), drafting's
// defaults and the worker's `accepts` all agree with it.
import 'reflect-metadata';
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { Body, Controller, Get, Module, Post, Query } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import {
  acceptsFor, capabilitiesOf, CLIP_SECONDS, EXPLICIT_SIZE, IMAGE_CAPABILITIES, IMAGE_DEFAULTS, IMAGE_PROFILES, MAX_PRIORITY, MAX_STEPS, MAX_WAIT_S,
  TTS_DEFAULTS, TTS_LANGUAGES, VIDEO_ASPECTS, VIDEO_AUDIO_MODES, VIDEO_CAPABILITIES, VIDEO_DEFAULTS, VIDEO_IMAGE_MODES, VIDEO_PROFILES, VIDEO_RES,
  voicesWithoutPicture, WAIT_DEFAULT_S,
} from '../../src/catalog';
import { BadInputError } from '../../src/common/errors';
import { draftImage } from '../../src/image/image.draft';
import { draftVideo } from '../../src/video/video.draft';
import { MAX_KEYFRAMES } from '../../src/models/minimax_h3/sequence/keyframes';
import { checkInputs, MAX_VOICES } from '../../src/models/minimax_h3/task';
import { GetJobQueryDto } from '../../src/jobs/jobs.dto';
import { GenerateImageDto } from '../../src/image/image.dto';
import { TtsDto } from '../../src/tts/tts.dto';
import { GenerateVideoDto } from '../../src/video/video.dto';

type Property = { default?: unknown; enum?: unknown[]; minimum?: number; maximum?: number; description?: string };
type Schema = { properties: Record<string, Property> };

@Controller()
class Probe {
  @Post('video') video(@Body() _: GenerateVideoDto) {}
  @Post('image') image(@Body() _: GenerateImageDto) {}
  @Post('tts') tts(@Body() _: TtsDto) {}
  @Get('job') job(@Query() _: GetJobQueryDto) {}
}
@Module({ controllers: [Probe] })
class ProbeModule {}

/** The OpenAPI document of the request DTOs, made by SwaggerModule.createDocument as /openapi.json is. */
let doc: { components: { schemas: Record<string, Schema> }; paths: Record<string, Record<string, { parameters: ({ name: string; schema: Property })[] }>> } | undefined;
before(async () => {
  const app = await NestFactory.create(ProbeModule, { logger: false });
  doc = SwaggerModule.createDocument(app, new DocumentBuilder().build()) as never;
  await app.close();
});

function schemaOf(dto: Function): Schema {
  return doc!.components.schemas[dto.name]!;
}

/** Every request default the table has that the DTO documents, field by field. */
function assertDefaults(s: Schema, defaults: Record<string, unknown>, what: string): void {
  for (const [field, value] of Object.entries(defaults)) {
    assert.ok(field in s.properties, `${what}.${field} is a field of the request`);
    assert.deepEqual(s.properties[field]!.default, value, `${what}.${field}'s documented default is the table's`);
  }
}

test('the video request schema is the table: every default, enum and bound', () => {
  const s = schemaOf(GenerateVideoDto);
  assertDefaults(s, VIDEO_DEFAULTS, 'video');
  const p = s.properties;
  const c = capabilitiesOf('video', VIDEO_DEFAULTS.profile)!;
  assert.deepEqual(p.profile!.enum, VIDEO_CAPABILITIES.map((e) => e.profile));
  assert.deepEqual([p.aspect!.enum, p.res!.enum, p.image_mode!.enum, p.audio_mode!.enum, p.tts_language!.enum], [[...c.aspects], [...c.res], [...VIDEO_IMAGE_MODES], [...VIDEO_AUDIO_MODES], [...TTS_LANGUAGES]]);
  assert.deepEqual([p.seconds!.minimum, p.seconds!.maximum], [c.seconds.min, c.seconds.max]);
  assert.deepEqual([p.priority!.minimum, p.priority!.maximum, p.timeout!.maximum], [0, MAX_PRIORITY, MAX_WAIT_S]);
  assert.match(p.images!.description!, new RegExp(`^0 to ${c.images.max} images`));
  assert.match(p.audios!.description!, new RegExp(`^0 to ${c.audios.max} clips of ${c.audios.clip_seconds.minS} to ${c.audios.clip_seconds.maxS} s`));
  // every video profile takes the same fields
  for (const e of VIDEO_CAPABILITIES) assert.deepEqual([e.defaults, e.aspects, e.res, e.seconds], [VIDEO_DEFAULTS, VIDEO_ASPECTS, VIDEO_RES, c.seconds]);
});

test('the image, speech and job-wait schemas are the table', () => {
  const s = schemaOf(GenerateImageDto);
  assertDefaults(s, IMAGE_DEFAULTS, 'image');
  const p = s.properties;
  const c = capabilitiesOf('image', IMAGE_DEFAULTS.profile)!;
  assert.deepEqual(p.profile!.enum, IMAGE_CAPABILITIES.map((e) => e.profile));
  assert.deepEqual([p.aspect!.enum, p.res!.enum], [[...c.aspects], [...c.res]]);
  assert.deepEqual([p.priority!.maximum, p.timeout!.maximum], [MAX_PRIORITY, MAX_WAIT_S]);
  assert.equal(p.size!.description, `Explicit <width>x<height>, multiples of ${EXPLICIT_SIZE.multiple_of} from ${EXPLICIT_SIZE.min} to ${EXPLICIT_SIZE.max}; overrides aspect and res`);
  assert.equal(p.steps!.description, `0 means the profile default (${c.steps.default} for ${c.profile})`);
  assert.equal(p.images!.description, 'imgmain profiles: 0 to 10 (editing); imgart_turbo profiles: 0 to 3 style references');
  const tts = schemaOf(TtsDto);
  assertDefaults(tts, TTS_DEFAULTS, 'tts');
  assert.deepEqual(tts.properties.language!.enum, [...TTS_LANGUAGES]);
  assert.match(tts.properties.ref_audio!.description!, new RegExp(`^Reference clip of ${CLIP_SECONDS.speech.minS} to ${CLIP_SECONDS.speech.maxS} s`));
  const wait = doc!.paths['/job']!.get!.parameters.find((q) => q.name === 'timeout')!.schema;
  assert.deepEqual([wait.default, wait.maximum], [WAIT_DEFAULT_S.job, MAX_WAIT_S]);
});

test('drafting applies the table\'s defaults, once: a bare request becomes a job with them', () => {
  const v = draftVideo({ prompt: 'x' }, 0, 0);
  const d = VIDEO_DEFAULTS;
  const c = capabilitiesOf('video', d.profile)!;
  assert.deepEqual([v.profile.profile, v.aspect, v.res, v.seconds, v.steps, v.image_mode, v.audio_mode, v.tts_text, v.tts_ref_text, v.tts_language, v.priority],
    [d.profile, d.aspect, d.res, d.seconds, c.steps.default, d.image_mode, d.audio_mode, d.tts_text, d.tts_ref_text, d.tts_language, d.priority]);
  const i = draftImage({ prompt: 'x' }, 0);
  const di = IMAGE_DEFAULTS;
  const ci = capabilitiesOf('image', di.profile)!;
  assert.deepEqual([i.profile.profile, i.aspect, i.res, i.size_from_ref, i.steps, i.cfg, i.negative, i.priority], [di.profile, di.aspect, di.res, di.size_from_ref, ci.steps.default, ci.cfg.default, di.negative_prompt, di.priority]);
  // a profile's own default steps and cfg, and the table's cfg bound
  for (const e of IMAGE_CAPABILITIES) assert.deepEqual([draftImage({ prompt: 'x', profile: e.profile }, 0).steps, draftImage({ prompt: 'x', profile: e.profile }, 0).cfg], [e.steps.default, e.cfg.default]);
  assert.throws(() => draftImage({ prompt: 'x', cfg: ci.cfg.max + 1 }, 0), new RegExp(`or from 1 to ${ci.cfg.max} \\(got ${ci.cfg.max + 1}\\)`));
  assert.equal(draftImage({ prompt: 'x', cfg: ci.cfg.max }, 0).cfg, ci.cfg.max);
});

test('/api/config\'s profile entries are views of the table; one default profile per kind', () => {
  for (const [infos, table, def] of [[VIDEO_PROFILES, VIDEO_CAPABILITIES, VIDEO_DEFAULTS.profile], [IMAGE_PROFILES, IMAGE_CAPABILITIES, IMAGE_DEFAULTS.profile]] as const) {
    assert.deepEqual(infos.map((p) => p.profile), table.map((c) => c.profile));
    assert.deepEqual(infos.filter((p) => p.default).map((p) => p.profile), [def]);
    for (const p of infos) {
      const c = capabilitiesOf(p.kind, p.profile)!;
      assert.deepEqual([p.default_steps, p.max_images, p.max_audios, p.modes, p.model, p.description], [c.steps.default, c.images.max, c.audios.max, [...c.modes], c.model, c.description]);
    }
  }
  assert.deepEqual(IMAGE_PROFILES.map((p) => [p.profile, p.can_edit, p.max_images, p.default_cfg]), [['imgmain', true, 10, 1], ['imgmain_bf16', true, 10, 1], ['imgart_turbo', false, 3, 1], ['imgart_turbo_int8', false, 3, 1]]);
});

test('a worker\'s accepts is the table entry plus the run-time facts: the Ref2VA weights open reference pictures and voices', () => {
  const c = capabilitiesOf('video', 'basevid50')!;
  const withRef = acceptsFor(c, { ref2va: true });
  assert.deepEqual({ ...withRef, inputsNote: undefined }, { steps: { min: 1, max: MAX_STEPS }, images: 6, audios: 3, imageModes: ['keyframe', 'reference'], audioModes: ['track', 'voice'], ttsText: true, inputsNote: undefined });
  assert.equal(withRef.inputsNote, 'text to video, keyframes (image_mode keyframe, 1 to 6 images), reference pictures (image_mode reference, 1 to 6) with 0 to 3 voices (audio_mode voice) or a soundtrack, a soundtrack (audio_mode track, 1 clip) and speech as the soundtrack (tts_text, in the voice of audios[0]) run');
  const without = acceptsFor(capabilitiesOf('video', 'fastvid')!, { ref2va: { missing: 'which these weights lack: transformer_ref/ of MiniMaxAI/MiniMax-H3' } });
  assert.deepEqual([without.images, without.audios, without.imageModes, without.audioModes], [6, 1, ['keyframe'], ['track']]);
  assert.equal(without.inputsNote, "reference pictures and voices need the Ref2VA weights, which these weights lack: transformer_ref/ of MiniMaxAI/MiniMax-H3; text to video, keyframes (image_mode keyframe, 1 to 6 images), a soundtrack (audio_mode track, 1 clip) and speech as the soundtrack (tts_text, in the voice of audios[0]) run");
  assert.deepEqual(acceptsFor(capabilitiesOf('image', 'imgmain')!), { steps: { min: 2, max: MAX_STEPS }, images: 10, audios: 0 });
  assert.deepEqual(acceptsFor(capabilitiesOf('image', 'imgart_turbo')!), { steps: { min: 1, max: MAX_STEPS }, images: 3, audios: 0 });
});

test('"voices need a picture" is one rule: voices are clips in audio_mode voice without tts_text', () => {
  const c = capabilitiesOf('video', 'basevid50')!;
  assert.equal(voicesWithoutPicture(c, { images: 0, audios: 1, audio_mode: 'voice', tts_text: false }), true);
  assert.equal(voicesWithoutPicture(c, { images: 1, audios: 1, audio_mode: 'voice', tts_text: false }), false);
  assert.equal(voicesWithoutPicture(c, { images: 0, audios: 1, audio_mode: 'voice', tts_text: true }), false, 'with tts_text the clip is the speech\'s voice');
  assert.equal(voicesWithoutPicture(c, { images: 0, audios: 1, audio_mode: 'track', tts_text: false }), false);
  assert.equal(voicesWithoutPicture(c, { images: 0, audios: 0, audio_mode: 'voice', tts_text: false }), false);
});

test('MiniMax H3 asserts what the table guaranteed: its input checks are the table\'s limits and rules', () => {
  const c = capabilitiesOf('video', 'basevid50')!;
  // the table never lets through more than the model lays out
  for (const e of VIDEO_CAPABILITIES) assert.ok(e.images.max <= MAX_KEYFRAMES && e.audios.modes.voice.max === MAX_VOICES, e.profile);
  const ok = (over: Partial<Parameters<typeof checkInputs>[0]>) => checkInputs({ images: [], audios: [], ...over });
  const refused = (over: Partial<Parameters<typeof checkInputs>[0]>, re: RegExp) => assert.throws(() => ok(over), (e: unknown) => e instanceof BadInputError && re.test(e.message));
  const files = (n: number) => Array.from({ length: n }, (_, i) => `f${i}`);
  // what drafting makes of each request the table allows, the model runs
  for (const [images, audios, audio_mode] of [[0, 0, 'voice'], [2, 0, 'voice'], [1, 3, 'voice'], [0, 1, 'track'], [6, 1, 'track']] as const) {
    const inputs = { images, audios, audio_mode, tts_text: false };
    assert.equal(voicesWithoutPicture(c, inputs), false);
    const d = draftVideo({ prompt: 'x', profile: c.profile, audio_mode }, images, audios);
    ok({ images: files(images), audios: files(audios), audioMode: d.audio_mode, imageMode: d.image_mode });
  }
  // and refuses what the table's rules refuse, with the reasons the pipeline always gave
  refused({ audios: ['v'], audioMode: 'voice' }, /^MiniMax H3: voices \(audio_mode voice\) need at least one reference picture \(image_mode reference\)/);
  refused({ images: ['p'], imageMode: 'keyframe', audios: ['v'] }, /need at least one reference picture/);
  refused({ images: ['p'], imageMode: 'reference', audios: files(4) }, /^MiniMax H3: 4 voices given, at most 3$/);
  refused({ audios: files(2), audioMode: 'track' }, /^MiniMax H3: audio_mode track takes 1 clip \(the soundtrack\), 2 given$/);
  refused({ images: files(7) }, /^MiniMax H3: 7 keyframes given, at most 6$/);
  refused({ images: files(7), imageMode: 'reference' }, /^MiniMax H3: 7 reference pictures given, at most 6$/);
});
