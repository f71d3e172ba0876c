import { readFile } from 'node:fs/promises';

/** CAP_SYS_RESOURCE: among others, lowering a process's oom_score_adj below its floor. */
export const CAP_SYS_RESOURCE = 24;

/** Whether a capability is in a /proc/<pid>/status text's effective set (CapEff, hexadecimal). */
export function hasCapability(status: string, capability: number): boolean {
  const hex = /^CapEff:\s*([0-9a-f]+)$/im.exec(status)?.[1];
  return hex !== undefined && ((BigInt(`0x${hex}`) >> BigInt(capability)) & 1n) === 1n;
}

/**
 * Whether this process may lower oom_score_adj (CAP_SYS_RESOURCE). Some VMs and containers run even root without
 * it; runc then fails every pod sandbox (the kubelet asks -998 for it) with "failed to update
 * /proc/self/oom_score_adj: Permission denied", surfaced as "can't get final child's PID from pipe: EOF".
 */
export async function mayLowerOomScore(): Promise<boolean> {
  return hasCapability(await readFile('/proc/self/status', 'utf8'), CAP_SYS_RESOURCE);
}
