/**
 * A Composio simulator that `@composio/core` cannot tell from Composio for everything the
 * broker uses: REST routes, the Tool Router MCP endpoint, consent pages and signed webhooks.
 * Used by sandbox mode and by tests.
 */
export { startSimulator, type Simulator, type SimulatorOptions } from './server.js';
export type { SimulatorControls, SimAccountView, SimStateDump } from './controls.js';
export type { FaultSpec, RecordedRequest } from './faults.js';
export type { DeliveryResult } from './webhooks.js';
export { startSandbox, type Sandbox } from './sandbox.js';
