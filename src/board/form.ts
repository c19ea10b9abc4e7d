import type { FastifyRequest } from 'fastify';
import { isSwitchboardError, type SwitchboardError } from '../domain/errors.ts';
import type { FieldError } from './views/layout.ts';

export type Form = Record<string, string | string[]>;

/** application/x-www-form-urlencoded → fields; a repeated name becomes an array. */
export function parseForm(body: string): Form {
  const out: Form = {};
  for (const [k, v] of new URLSearchParams(body)) {
    const had = out[k];
    out[k] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v];
  }
  return out;
}

export const formOf = (req: FastifyRequest): Form => (req.body && typeof req.body === 'object' ? (req.body as Form) : {});
export function field(form: Form, name: string): string | undefined {
  const v = form[name];
  return Array.isArray(v) ? v[0] : v;
}
export function fields(form: Form, name: string): string[] {
  const v = form[name];
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
}

export const fieldErrorOf = (err: SwitchboardError): FieldError => ({
  field: typeof err.details.field === 'string' ? err.details.field : 'form',
  message: err.message,
});

export const isInvalid = (err: unknown): err is SwitchboardError => isSwitchboardError(err) && err.code === 'invalid_argument';
