// The worker's image task as Krea 2's: the images are style references (mode stays t2i).
import type { ImageTask } from '../../catalog';
import { imageJobTaskOf } from '../common/image-task';
import type { Krea2ImageTask } from './pipeline';

export function krea2TaskOf(t: ImageTask): Krea2ImageTask {
  return imageJobTaskOf(t);
}
