import { writeFile } from 'node:fs/promises';
import { generateApiDocument } from '../src/api-document.js';

// `npm run openapi`: writes the reference the routes declare to the repository's openapi.yaml.
const target = new URL('../openapi.yaml', import.meta.url);
await writeFile(target, await generateApiDocument());
console.log(`wrote ${target.pathname}`);
