import type { Command } from '../command.js';
import { agentCommand } from './agent.js';
import { devCommand } from './dev.js';
import { hubCommand } from './hub.js';
import { statusCommand } from './status.js';
import { versionCommand } from './version.js';

/** Every subcommand of `ctrlmesh`, in the order --help lists them. */
export const commands: Command[] = [versionCommand, devCommand, hubCommand, agentCommand, statusCommand];
