import type { Command } from '../command.js';
import { agentCommand } from './agent.js';
import { crdsCommand } from './crds.js';
import { demoCommand } from './demo.js';
import { devCommand } from './dev.js';
import { hashCommand } from './hash.js';
import { hubCommand } from './hub.js';
import { kubeconfigCommand } from './kubeconfig.js';
import { natsAuthCommand } from './nats-auth.js';
import { planCommand } from './plan.js';
import { proxyCommand } from './proxy.js';
import { statusCommand } from './status.js';
import { validateCommand } from './validate.js';
import { versionCommand } from './version.js';

/** Every subcommand of `ctrlmesh`, in the order --help lists them. */
export const commands: Command[] = [
  versionCommand,
  hashCommand,
  validateCommand,
  planCommand,
  crdsCommand,
  devCommand,
  natsAuthCommand,
  hubCommand,
  agentCommand,
  statusCommand,
  proxyCommand,
  kubeconfigCommand,
  demoCommand,
];
