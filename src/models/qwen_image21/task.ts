// The worker's image task as Qwen-Image-2.1's: the shared fields, and the area its edit references are scaled to.
import { referenceArea, type ImageTask } from '../../catalog';
import { imageJobTaskOf } from '../common/image-task';
import type { QwenImageTask } from './pipeline';

export function qwenImageTaskOf(t: ImageTask): QwenImageTask {
  return { ...imageJobTaskOf(t), referenceArea: referenceArea(t.params.res, t.params.width, t.params.height) };
}
