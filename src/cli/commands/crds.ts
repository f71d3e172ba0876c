import { dumpYaml } from '@kubernetes/client-node';
import { buildCrds } from '../../api/index.js';
import type { Command } from '../command.js';

export const crdsCommand: Command = {
  name: 'crds',
  summary: 'Print the CustomResourceDefinitions of ShardingConfig, CircuitBreaker and FaultInjection as YAML.',
  usage: '',
  details: 'Apply them with: ctrlmesh crds | kubectl apply -f -',
  options: {},
  run: async ({ stdout }) => {
    stdout.write(buildCrds().map((crd) => dumpYaml(crd)).join('---\n'));
    return 0;
  },
};
