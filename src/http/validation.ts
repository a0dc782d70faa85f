import { ArgumentMetadata, HttpException, HttpStatus, ValidationError, ValidationPipe } from '@nestjs/common';
import { ValidateIf } from 'class-validator';
import { BadInputError } from '../common/errors';

/** Deepest nesting of objects and arrays a request may carry (the deepest field of this API is 2: images[i]). */
const MAX_DEPTH = 16;

/** Whether objects and arrays nest more than `limit` levels below `value` (iterative: no recursion to overflow). */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth >= limit) return true;
    for (const child of Object.values(v as object)) stack.push([child, depth + 1]);
  }
  return false;
}

/** One entry of the spec's validation error object (HTTP 422). */
export interface ValidationEntry {
  loc: (string | number)[];
  msg: string;
  type: string;
  input?: unknown;
}

export class ValidationFailed extends HttpException {
  constructor(readonly entries: ValidationEntry[]) {
    super({ detail: entries }, HttpStatus.UNPROCESSABLE_ENTITY);
  }
}

/** Marks a field optional (absent = default) while still type-checking an explicit null, unlike @IsOptional. */
export const Optional = () => ValidateIf((o: Record<string, unknown>, v: unknown) => v !== undefined);
/** Optional, and null allowed (callback_url). */
export const Nullable = () => ValidateIf((o: Record<string, unknown>, v: unknown) => v !== undefined && v !== null);

/** DTO classes of multipart forms and query strings set `static multipart = true`: their string fields are
 * parsed into the declared number/boolean types first, with the same rules as JSON afterwards. */
interface FormClass {
  multipart?: boolean;
}

const TRUE = ['true', '1', 'yes', 'on'];
const FALSE = ['false', '0', 'no', 'off'];

function coerceForm(body: Record<string, unknown>, metatype: { prototype: object }): Record<string, unknown> {
  const out: Record<string, unknown> = { ...body };
  for (const [key, value] of Object.entries(body)) {
    if (typeof value !== 'string') continue;
    const t = Reflect.getMetadata('design:type', metatype.prototype, key);
    const s = value.trim();
    if (t === Number && s !== '' && /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s)) out[key] = Number(s);
    else if (t === Number && s === '') delete out[key]; // an empty form field means "use the default"
    else if (t === Boolean && TRUE.includes(s.toLowerCase())) out[key] = true;
    else if (t === Boolean && FALSE.includes(s.toLowerCase())) out[key] = false;
    else if (t === Boolean && s === '') delete out[key];
  }
  return out;
}

const MESSAGES: Record<string, [string, string]> = {
  isDefined: ['missing', 'Field required'],
  isString: ['string_type', 'Input should be a valid string'],
  isNumber: ['float_type', 'Input should be a valid number'],
  isInt: ['int_type', 'Input should be a valid integer'],
  isBoolean: ['bool_type', 'Input should be a valid boolean'],
  isArray: ['list_type', 'Input should be a valid list'],
};

function entryFor(where: string, e: ValidationError): ValidationEntry {
  const keys = Object.keys(e.constraints ?? {});
  const key = ['isDefined', 'isArray', 'isString', 'isInt', 'isNumber', 'isBoolean'].find((k) => keys.includes(k)) ?? keys[0];
  let [type, msg] = MESSAGES[key] ?? ['value_error', e.constraints?.[key] ?? 'Invalid value'];
  const input = e.value;
  if (key === 'isDefined') return { loc: [where, e.property], msg, type, input: null };
  if (key === 'isString' && Array.isArray(input)) {
    // `each: true` on a list: point at the first offending item.
    const i = input.findIndex((x) => typeof x !== 'string');
    return { loc: [where, e.property, i], msg, type, input: input[i] };
  }
  if (typeof input === 'string' && (key === 'isNumber' || key === 'isInt' || key === 'isBoolean')) {
    type = type.replace('_type', '_parsing');
    msg = key === 'isBoolean' ? 'Input should be a valid boolean, unable to interpret input' : `${msg}, unable to parse string as ${key === 'isInt' ? 'an integer' : 'a number'}`;
  } else if (key === 'isInt' && typeof input === 'number') {
    type = 'int_from_float';
    msg = 'Input should be a valid integer, got a number with a fractional part';
  }
  return { loc: [where, e.property], msg, type, input };
}

/** The app's one validation pipe: class-validator on the DTO, failures as the spec's 422 object
 * (`detail`: one entry per offending field, `loc` like ["body","seconds"]). */
export class ApiValidationPipe extends ValidationPipe {
  constructor() {
    super({ transform: true, forbidUnknownValues: false, validationError: { target: false, value: true } });
  }

  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    const where = metadata.type === 'custom' ? 'body' : metadata.type;
    const metatype = metadata.metatype as (FormClass & { prototype: object }) | undefined;
    if (!metatype || !this.toValidate(metadata)) return value;
    if (where === 'body' && (value === null || typeof value !== 'object' || Array.isArray(value))) {
      throw new ValidationFailed([{ loc: ['body'], msg: 'Input should be a valid dictionary or object to extract fields from', type: 'model_attributes_type', input: value }]);
    }
    // class-transformer and class-validator recurse into nested values: a body nested thousands of levels deep
    // (JSON, or multipart names like a[b][c]...) would run them out of stack. No field of this API nests deeper.
    if (nestedDeeperThan(value, MAX_DEPTH)) throw new BadInputError(`the ${where === 'body' ? 'request body' : where} is nested more than ${MAX_DEPTH} levels deep; no field of this API nests like that`);
    let v = value as Record<string, unknown>;
    if (metatype.multipart) v = coerceForm(v, metatype);
    this.exceptionFactory = (errors: ValidationError[]) => new ValidationFailed(errors.map((e) => entryFor(where, e)));
    return super.transform(v, metadata);
  }
}
