/**
 * The simulator's world of apps: a catalog as large as Composio's (1,000 toolkits: six written
 * by hand, with tools for the MCP meta-tools, then made-up ones generated the same way every
 * run), and the trigger types the broker uses (one generated toolkit has more than a page of
 * them). Shapes follow Composio's wire types; contents are made up but plausible.
 */

export const TOOLKIT_VERSION = '20250909_00';

export interface ToolDef {
  readonly slug: string;
  readonly name: string;
  readonly description: string;
  readonly inputSchema: Record<string, unknown>;
}

export interface ToolkitDef {
  readonly slug: string;
  readonly name: string;
  readonly description: string;
  readonly category: string;
  readonly authSchemes: readonly string[];
  /** Empty: Composio has no managed sign-in for it (a link needs the project's own auth config). */
  readonly managedAuthSchemes: readonly string[];
  readonly noAuth: boolean;
  /** Whether Composio can revoke the provider's tokens for it programmatically. */
  readonly revocable: boolean;
  readonly tools: readonly ToolDef[];
}

export interface TriggerTypeDef {
  readonly slug: string;
  readonly name: string;
  readonly description: string;
  readonly instructions: string;
  readonly type: 'webhook' | 'poll';
  readonly toolkit: string;
  readonly config: Record<string, unknown>;
  readonly payload: Record<string, unknown>;
  /** What a fired event carries when the developer does not supply data. */
  readonly sample: Record<string, unknown>;
}

const obj = (properties: Record<string, unknown>, required: string[] = []) => ({ type: 'object', properties, required });
const str = (description: string) => ({ type: 'string', description });

const HAND_WRITTEN: readonly ToolkitDef[] = [
  {
    slug: 'gmail',
    name: 'Gmail',
    description: 'Read, send and organise email in Gmail.',
    category: 'communication',
    authSchemes: ['OAUTH2'],
    managedAuthSchemes: ['OAUTH2'],
    noAuth: false,
    revocable: true,
    tools: [
      {
        slug: 'GMAIL_SEND_EMAIL',
        name: 'Send email',
        description: 'Send an email from the connected Gmail account.',
        inputSchema: obj({ recipient_email: str('To address'), subject: str('Subject'), body: str('Body') }, ['recipient_email']),
      },
      {
        slug: 'GMAIL_FETCH_EMAILS',
        name: 'Fetch emails',
        description: 'List recent emails matching a Gmail search query.',
        inputSchema: obj({ query: str('Gmail search syntax'), max_results: { type: 'integer' } }),
      },
    ],
  },
  {
    slug: 'slack',
    name: 'Slack',
    description: 'Send and read messages in Slack workspaces.',
    category: 'communication',
    authSchemes: ['OAUTH2'],
    managedAuthSchemes: ['OAUTH2'],
    noAuth: false,
    revocable: true,
    tools: [
      {
        slug: 'SLACK_SEND_MESSAGE',
        name: 'Send message',
        description: 'Post a message to a Slack channel.',
        inputSchema: obj({ channel: str('Channel id or name'), text: str('Message text') }, ['channel', 'text']),
      },
      { slug: 'SLACK_LIST_CHANNELS', name: 'List channels', description: 'List the channels of the workspace.', inputSchema: obj({}) },
    ],
  },
  {
    slug: 'github',
    name: 'GitHub',
    description: 'Work with repositories, issues and pull requests on GitHub.',
    category: 'developer-tools',
    authSchemes: ['OAUTH2'],
    managedAuthSchemes: ['OAUTH2'],
    noAuth: false,
    // Guess: which apps refuse programmatic revocation is not documented; one does here so the
    // "revocation not supported" path can be exercised.
    revocable: false,
    tools: [
      {
        slug: 'GITHUB_CREATE_AN_ISSUE',
        name: 'Create an issue',
        description: 'Open an issue in a repository.',
        inputSchema: obj({ owner: str('Owner'), repo: str('Repository'), title: str('Title'), body: str('Body') }, [
          'owner',
          'repo',
          'title',
        ]),
      },
      {
        slug: 'GITHUB_LIST_REPOSITORIES',
        name: 'List repositories',
        description: 'List the repositories of the signed-in user.',
        inputSchema: obj({}),
      },
    ],
  },
  {
    slug: 'googlecalendar',
    name: 'Google Calendar',
    description: 'Create and read events in Google Calendar.',
    category: 'productivity',
    authSchemes: ['OAUTH2'],
    managedAuthSchemes: ['OAUTH2'],
    noAuth: false,
    revocable: true,
    tools: [
      {
        slug: 'GOOGLECALENDAR_CREATE_EVENT',
        name: 'Create event',
        description: 'Create a calendar event.',
        inputSchema: obj({ summary: str('Title'), start_datetime: str('ISO start'), event_duration_minutes: { type: 'integer' } }, [
          'summary',
          'start_datetime',
        ]),
      },
      {
        slug: 'GOOGLECALENDAR_FIND_EVENT',
        name: 'Find event',
        description: 'Search calendar events.',
        inputSchema: obj({ query: str('Text to search for') }),
      },
    ],
  },
  {
    slug: 'hackernews',
    name: 'Hacker News',
    description: 'Read stories and comments from Hacker News.',
    category: 'news',
    authSchemes: [],
    managedAuthSchemes: [],
    noAuth: true,
    revocable: false,
    tools: [
      {
        slug: 'HACKERNEWS_GET_FRONTPAGE',
        name: 'Get front page',
        description: 'The stories on the front page.',
        inputSchema: obj({ min_points: { type: 'integer' } }),
      },
    ],
  },
  {
    slug: 'xero',
    name: 'Xero',
    description: 'Accounting: invoices, contacts and payments in Xero.',
    category: 'accounting',
    authSchemes: ['OAUTH2'],
    managedAuthSchemes: [],
    noAuth: false,
    revocable: true,
    tools: [
      {
        slug: 'XERO_LIST_INVOICES',
        name: 'List invoices',
        description: 'List invoices of the organisation.',
        inputSchema: obj({ status: str('Invoice status') }),
      },
    ],
  },
];

const HAND_WRITTEN_TRIGGER_TYPES: readonly TriggerTypeDef[] = [
  {
    slug: 'GMAIL_NEW_GMAIL_MESSAGE',
    name: 'New Gmail Message Received Trigger',
    description: 'Triggers when a new message is received in Gmail.',
    instructions: 'Polls the mailbox on the configured interval.',
    type: 'poll',
    toolkit: 'gmail',
    config: {
      title: 'NewMessageConfig',
      type: 'object',
      properties: {
        interval: {
          type: 'number',
          default: 1,
          title: 'Interval',
          description: 'Periodic Interval to Check for Updates & Send a Trigger in Minutes',
        },
        labelIds: { type: 'string', default: 'INBOX', title: 'Labelids', examples: ['INBOX', 'UNREAD', 'STARRED'] },
        query: { type: 'string', default: '', title: 'Query', description: 'Gmail search syntax; takes precedence over labelIds' },
        userId: { type: 'string', default: 'me', title: 'Userid' },
      },
    },
    payload: {
      title: 'NewMessagePayload',
      type: 'object',
      properties: Object.fromEntries(
        ['message_id', 'thread_id', 'message_text', 'message_timestamp', 'sender', 'to', 'subject', 'attachment_list', 'payload'].map(
          (k) => [k, { anyOf: [{ type: 'string' }, { type: 'null' }], default: null }],
        ),
      ),
    },
    sample: {
      message_id: '18c2f0a1b2c3d4e5',
      thread_id: '18c2f0a1b2c3d4e5',
      message_text: 'Hello from the Composio simulator.',
      message_timestamp: '2025-01-01T09:00:00Z',
      sender: 'Ada Lovelace <ada@example.com>',
      to: 'me@example.com',
      subject: 'Simulated message',
      attachment_list: [],
      payload: null,
    },
  },
  {
    slug: 'SLACK_RECEIVE_MESSAGE',
    name: 'Message Received',
    description: 'Triggers when a message is posted in a channel the app can see.',
    instructions: 'Delivered by Slack to Composio as it happens.',
    type: 'webhook',
    toolkit: 'slack',
    config: {
      title: 'ReceiveMessageConfig',
      type: 'object',
      properties: {
        channel: { type: 'string', title: 'Channel', description: 'Only messages in this channel id (empty: all)', default: '' },
      },
    },
    payload: {
      title: 'ReceiveMessagePayload',
      type: 'object',
      properties: { channel: { type: 'string' }, user: { type: 'string' }, text: { type: 'string' }, ts: { type: 'string' } },
    },
    sample: { channel: 'C0123456', user: 'U0123456', text: 'Hello from the Composio simulator.', ts: '1735722000.000100' },
  },
  {
    slug: 'GITHUB_COMMIT_EVENT',
    name: 'Commit Event',
    description: 'Triggers when commits are pushed to a repository.',
    instructions: 'Composio registers a webhook on the repository.',
    type: 'webhook',
    toolkit: 'github',
    config: {
      title: 'CommitEventConfig',
      type: 'object',
      properties: {
        owner: { type: 'string', title: 'Owner', description: 'Owner of the repository' },
        repo: { type: 'string', title: 'Repo', description: 'Repository name' },
      },
      required: ['owner', 'repo'],
    },
    payload: {
      title: 'CommitEventPayload',
      type: 'object',
      properties: {
        id: { type: 'string' },
        message: { type: 'string' },
        author: { type: 'string' },
        url: { type: 'string' },
        timestamp: { type: 'string' },
      },
    },
    sample: {
      id: 'a1b2c3d',
      message: 'Simulated commit',
      author: 'ada',
      url: 'https://github.com/example/repo/commit/a1b2c3d',
      timestamp: '2025-01-01T09:00:00Z',
    },
  },
];

/** How many toolkits a simulator lists unless told otherwise: Composio's catalog is about this large. */
export const DEFAULT_TOOLKIT_COUNT = 1000;

const PREFIXES = [
  'Acme',
  'Aero',
  'Alpine',
  'Amber',
  'Apex',
  'Arc',
  'Astra',
  'Atlas',
  'Aurora',
  'Beacon',
  'Birch',
  'Blue',
  'Bolt',
  'Bright',
  'Cedar',
  'Cipher',
  'Cloud',
  'Coral',
  'Crest',
  'Delta',
  'Echo',
  'Ember',
  'Falcon',
  'Fern',
  'Flux',
  'Forge',
  'Gale',
  'Granite',
  'Harbor',
  'Helix',
  'Indigo',
  'Iron',
  'Jade',
  'Juniper',
  'Keystone',
  'Lumen',
  'Maple',
  'Meridian',
  'Nimbus',
  'Nova',
  'Oak',
  'Onyx',
  'Orbit',
  'Pine',
  'Pixel',
  'Prism',
  'Quartz',
  'Raven',
  'Ridge',
  'Sage',
  'Slate',
  'Solar',
  'Spruce',
  'Summit',
  'Tidal',
  'Vertex',
  'Willow',
  'Zenith',
];
/** The second half of a generated name, and the category an app so named falls in. */
const KINDS: readonly (readonly [string, string])[] = [
  ['Desk', 'customer-support'],
  ['Flow', 'automation'],
  ['Base', 'databases'],
  ['Mail', 'communication'],
  ['Docs', 'documents'],
  ['Sheets', 'productivity'],
  ['Chat', 'communication'],
  ['Pay', 'payments'],
  ['CRM', 'crm'],
  ['Books', 'accounting'],
  ['Forms', 'forms'],
  ['Track', 'project-management'],
  ['Board', 'project-management'],
  ['Drive', 'file-storage'],
  ['Notes', 'productivity'],
  ['Meet', 'video-conferencing'],
  ['Ship', 'ecommerce'],
  ['Sign', 'documents'],
  ['Ads', 'marketing'],
  ['Cast', 'social-media'],
  ['Hub', 'developer-tools'],
  ['Analytics', 'analytics'],
];

/**
 * The `index`-th generated toolkit (0-based, after the hand-written six): the same for every
 * run and every simulator. About one in 37 needs no sign-in, one in 9 has no Composio-managed
 * sign-in (an API key the project must configure), the rest are managed OAuth 2 apps.
 */
function generatedToolkit(index: number): ToolkitDef {
  const prefix = PREFIXES[index % PREFIXES.length] as string;
  const [kind, category] = KINDS[Math.floor(index / PREFIXES.length) % KINDS.length] as readonly [string, string];
  const round = Math.floor(index / (PREFIXES.length * KINDS.length));
  const name = `${prefix} ${kind}${round > 0 ? ` ${round + 1}` : ''}`;
  const noAuth = index % 37 === 5;
  const apiKey = !noAuth && index % 9 === 4;
  return {
    slug: name.toLowerCase().replace(/[^a-z0-9]/g, ''),
    name,
    description: `${name}: ${category.replace(/-/g, ' ')} for teams.`,
    category,
    authSchemes: noAuth ? [] : apiKey ? ['API_KEY'] : ['OAUTH2'],
    managedAuthSchemes: noAuth || apiKey ? [] : ['OAUTH2'],
    noAuth,
    revocable: !noAuth && !apiKey,
    tools: [],
  };
}

/** Every toolkit made so far, in catalog order (by usage: the hand-written six first). */
const universe: ToolkitDef[] = [...HAND_WRITTEN];
const bySlug = new Map(universe.map((t) => [t.slug, t]));

/**
 * The first `count` toolkits of the catalog. A simulator told to list more than the default
 * makes the extra ones here, and from then on `findToolkit` knows them in this process too.
 */
export function catalogOf(count: number): readonly ToolkitDef[] {
  while (universe.length < count) {
    const toolkit = generatedToolkit(universe.length - HAND_WRITTEN.length);
    universe.push(toolkit);
    bySlug.set(toolkit.slug, toolkit);
  }
  return universe.slice(0, count);
}

export const TOOLKITS: readonly ToolkitDef[] = catalogOf(DEFAULT_TOOLKIT_COUNT);

/** A generated toolkit with more trigger types than Composio lists on one page (50). */
export const MANY_TRIGGERS_TOOLKIT = (TOOLKITS[HAND_WRITTEN.length] as ToolkitDef).slug;

const OBJECTS = ['TICKET', 'CONTACT', 'COMPANY', 'DEAL', 'TASK', 'NOTE', 'CALL', 'MEETING', 'INVOICE', 'PRODUCT', 'QUOTE', 'CAMPAIGN'];
const CHANGES = ['CREATED', 'UPDATED', 'DELETED', 'ASSIGNED', 'MERGED'];

function generatedTriggerTypes(toolkit: ToolkitDef): TriggerTypeDef[] {
  return OBJECTS.flatMap((object) =>
    CHANGES.map((change) => {
      const noun = object.toLowerCase();
      const verb = change.toLowerCase();
      return {
        slug: `${toolkit.slug.toUpperCase()}_${object}_${change}`,
        name: `${noun[0]?.toUpperCase()}${noun.slice(1)} ${verb}`,
        description: `Triggers when a ${noun} is ${verb} in ${toolkit.name}.`,
        instructions: `${toolkit.name} calls Composio as it happens.`,
        type: 'webhook' as const,
        toolkit: toolkit.slug,
        config: { title: `${object}Config`, type: 'object', properties: {} },
        payload: {
          title: `${object}Payload`,
          type: 'object',
          properties: { id: { type: 'string' }, name: { type: 'string' }, changed_at: { type: 'string' } },
        },
        sample: { id: `${noun}_1`, name: `Simulated ${noun}`, changed_at: '2025-01-01T09:00:00Z' },
      };
    }),
  );
}

export const TRIGGER_TYPES: readonly TriggerTypeDef[] = [
  ...HAND_WRITTEN_TRIGGER_TYPES,
  ...generatedTriggerTypes(TOOLKITS[HAND_WRITTEN.length] as ToolkitDef),
];
const triggerTypesBySlug = new Map(TRIGGER_TYPES.map((t) => [t.slug, t]));

export function findToolkit(slug: string): ToolkitDef | undefined {
  return bySlug.get(slug.toLowerCase());
}

export function findTriggerType(slug: string): TriggerTypeDef | undefined {
  return triggerTypesBySlug.get(slug.toUpperCase());
}

export function findTool(slug: string): { tool: ToolDef; toolkit: ToolkitDef } | undefined {
  for (const toolkit of HAND_WRITTEN) {
    const tool = toolkit.tools.find((t) => t.slug === slug.toUpperCase());
    if (tool) return { tool, toolkit };
  }
  return undefined;
}

export function logoUrl(slug: string): string {
  return `https://logos.composio.dev/api/${slug}`;
}
