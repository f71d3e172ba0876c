import type { Command } from '../command.js';

/**
 * Every subcommand of `ctrlmesh`, in the order --help lists them, each loaded when it is needed: a process loads the
 * code of the command it runs and no other (the proxy sidecar would otherwise carry the agent's Kubernetes client).
 */
const loaders: readonly (readonly [name: string, load: () => Promise<Command>])[] = [
  ['version', async () => (await import('./version.js')).versionCommand],
  ['hash', async () => (await import('./hash.js')).hashCommand],
  ['validate', async () => (await import('./validate.js')).validateCommand],
  ['plan', async () => (await import('./plan.js')).planCommand],
  ['crds', async () => (await import('./crds.js')).crdsCommand],
  ['dev', async () => (await import('./dev.js')).devCommand],
  ['nats-auth', async () => (await import('./nats-auth.js')).natsAuthCommand],
  ['hub', async () => (await import('./hub.js')).hubCommand],
  ['agent', async () => (await import('./agent.js')).agentCommand],
  ['status', async () => (await import('./status.js')).statusCommand],
  ['clusters', async () => (await import('./clusters.js')).clustersCommand],
  ['proxy', async () => (await import('./proxy.js')).proxyCommand],
  ['kubeconfig', async () => (await import('./kubeconfig.js')).kubeconfigCommand],
  ['run', async () => (await import('./run.js')).runCommand],
  ['demo', async () => (await import('./demo.js')).demoCommand],
];

/**
 * The commands `argv` needs: the one it names, or all of them (for --help, or to say a name is unknown). An
 * unknown name cannot be a command's, since every command is listed here under its own name.
 */
export async function commandsFor(argv: readonly string[]): Promise<Command[]> {
  const named = loaders.find(([name]) => name === argv[0]);
  return Promise.all((named ? [named] : loaders).map(([, load]) => load()));
}
