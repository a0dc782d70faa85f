import { Injectable } from '@nestjs/common';
import { probeAudio } from '../media/audio-input';
import { probeImage } from '../media/image-input';
import { InputProbe } from './input-probe';

/** Create-time input checks on the media module: images fully decoded once (a truncated file is a 400 now,
 * not a failed job later), clips decoded and their samples counted. */
@Injectable()
export class MediaInputProbe extends InputProbe {
  async image(data: Buffer, label: string) {
    const p = await probeImage(data, label, { verify: true });
    return { width: p.width, height: p.height, format: p.format };
  }

  async audioSeconds(data: Buffer, label: string, limits: { minS: number; maxS: number }) {
    return (await probeAudio(data, label, { limits })).durationS;
  }
}
