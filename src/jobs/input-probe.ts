/** What the API must know about an input at create time, so a bad file is a 400 then and not a failed job later.
 * Implementations throw BadInputError naming `label` (e.g. "images[1]"). */
export abstract class InputProbe {
  /** Decodable png/jpeg/webp/gif (first frame of animations) within the pixel cap. */
  abstract image(data: Buffer, label: string): Promise<{ width: number; height: number; format: string }>;
  /** Exact duration in seconds of a decodable audio clip (wav, mp3, m4a/aac, flac, ogg/opus, mp4 audio track),
   * refused with its measured length when outside [minS, maxS]. */
  abstract audioSeconds(data: Buffer, label: string, limits: { minS: number; maxS: number }): Promise<number>;
}

/** One user input, from a multipart file or a fetched URL / data URI. */
export interface InputFile {
  label: string;
  data: Buffer;
  /** Original file name or URL, for the extension only. */
  name?: string;
}
