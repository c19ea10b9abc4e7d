import { readFileSync } from 'node:fs';

/** The one place the product version is read; everything else imports it from here. */
export const VERSION: string = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
