import { Injectable } from '@nestjs/common';
import { MAX_INPUT_BYTES } from '../catalog';
import { BadInputError } from '../common/errors';
import { OutboundClient } from '../net/outbound';
import { InputFile, InputProbe } from './input-probe';

/** A create request's input files, for the feature services (video/, image/, tts/) that own what their inputs must be:
 * fetched when the JSON form names them (URL or data URI), and probed (images decodable and within the size limit,
 * clips of a given length). */
@Injectable()
export class JobInputs {
  constructor(private readonly probe: InputProbe, private readonly outbound: OutboundClient) {}

  /** Fetches URL / data-URI inputs (JSON forms), labelled `field[i]`. */
  async fetchAll(refs: string[] | undefined, field: 'images' | 'audios', media: 'image' | 'audio'): Promise<InputFile[]> {
    return Promise.all((refs ?? []).map((ref, i) => this.fetchOne(ref, `${field}[${i}]`, media)));
  }

  async fetchOne(ref: string, label: string, media: 'image' | 'audio'): Promise<InputFile> {
    return { label, data: await this.outbound.fetchInput(ref, label, media), name: ref.startsWith('data:') ? undefined : ref };
  }

  async probeImages(images: InputFile[]): Promise<{ width: number; height: number; format: string }[]> {
    return Promise.all(images.map((f) => {
      if (f.data.length > MAX_INPUT_BYTES) throw new BadInputError(`${f.label}: file is ${(f.data.length / 1048576).toFixed(1)} MB; images may be at most ${MAX_INPUT_BYTES / 1048576} MB`);
      return this.probe.image(f.data, f.label);
    }));
  }

  async checkAudioLengths(audios: InputFile[], limits: { minS: number; maxS: number }): Promise<number[]> {
    return Promise.all(audios.map((f) => this.probe.audioSeconds(f.data, f.label, limits)));
  }
}
