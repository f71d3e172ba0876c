import type { Command } from '../command.js';
import { kubeconfigCommand } from './kubeconfig.js';
import { versionCommand } from './version.js';

/** Every subcommand of `ctrlmesh`, in the order --help lists them. */
export const commands: Command[] = [versionCommand, kubeconfigCommand];
