// Processes and owner records ("<pid>\n<start time>\n<token>\n" files naming the process that owns a directory).

import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';

export function errorText(err: unknown): string {
  if (err && typeof err === 'object') {
    const e = err as { stderr?: unknown; stdout?: unknown; message?: unknown };
    const out = [e.stderr, e.stdout].filter((s): s is string => typeof s === 'string' && s.trim() !== '');
    if (out.length) return out.map((s) => s.trim()).join('\n');
    if (typeof e.message === 'string') return e.message;
  }
  return String(err);
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  // A zombie (exited, not yet reaped by init) still answers kill(pid, 0).
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}

/** Kernel start time of a process (clock ticks since boot), to detect PID reuse. Linux only. */
export async function processStartTime(pid: number): Promise<string | undefined> {
  try {
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
    // Field 22; comm (field 2) may contain spaces, so count from the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

export interface OwnerRecord {
  pid: number;
  startTime?: string;
  token?: string;
}

/** "<pid>\n<start time>\n<token>\n"; the token tells apart two holders within one process. */
export async function ownerRecordText(token = ''): Promise<string> {
  return `${process.pid}\n${(await processStartTime(process.pid)) ?? ''}\n${token}\n`;
}

export async function readOwnerRecord(file: string): Promise<OwnerRecord | undefined> {
  const text = await fs.readFile(file, 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const [pidLine, startLine, tokenLine] = text.split('\n');
  const pid = Number(pidLine);
  if (!Number.isInteger(pid) || pid <= 0) return { pid: 0 };
  return { pid, startTime: startLine?.trim() || undefined, token: tokenLine?.trim() || undefined };
}

export async function ownerIsAlive(owner: OwnerRecord): Promise<boolean> {
  if (owner.pid <= 0 || !isAlive(owner.pid)) return false;
  if (!owner.startTime) return true;
  const now = await processStartTime(owner.pid);
  return now === undefined || now === owner.startTime;
}

// Lock files this process holds, so a second start in the same process is refused
