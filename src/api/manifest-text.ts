import yaml from 'js-yaml';

/**
 * The documents of a manifest file's text: YAML with any number of documents, or JSON (which is YAML). Empty
 * documents (a leading or trailing `---`, a document of comments only) are left out, as kubectl leaves them out.
 * Throws js-yaml's error, naming the line, on text that is not YAML.
 */
export function parseManifests(text: string): unknown[] {
  return yaml.loadAll(text).filter((doc) => doc !== null && doc !== undefined);
}
