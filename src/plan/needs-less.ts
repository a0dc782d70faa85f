// What a job over its GPU budget can change to need less, by kind: said by a plan's offload note (plan.ts) and by the
// create path's refusal (jobs/fit-check.ts), which must not load plan.ts (it imports the engine).
export const NEEDS_LESS: Record<'video' | 'image' | 'tts', string> = {
  video: 'a lower res or fewer seconds needs less',
  image: 'a smaller res or size needs less',
  tts: 'a shorter text or reference clip needs less',
};
