/**
 * A Composio simulator that `@composio/core` cannot tell from Composio for everything the
 * broker uses: REST routes, the Tool Router MCP endpoint, consent pages and signed webhooks.
 * Used by sandbox mode and by tests.
 */

export type { TriggerOwner } from './context.js';
export type { FaultSpec, RecordedRequest } from './faults.js';
export { type Sandbox, startSandbox } from './sandbox.js';
export { type Simulator, type SimulatorOptions, startSimulator } from './server.js';
export type { SimReadings } from './store.js';
