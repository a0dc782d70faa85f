// The OpenAPI document's request bodies are written out in place instead of as $ref to a component schema.
//
// Why: every optional request field has a `default`, and openapi-typescript (7, default options) turns a property with
// a default into a required one in any schema outside a request body: a TypeScript client generated from a $ref'd
// body schema then refuses the spec's own minimal call `{prompt, seconds}` ("missing profile, steps, ..."). Inside
// `requestBody` it keeps them optional, as they are. The component schemas a request body alone used are dropped.
type Json = Record<string, any>;

export function inlineRequestBodies(doc: Json): void {
  const schemas: Json = doc.components?.schemas ?? {};
  const inlined = new Set<string>();
  const resolve = (node: any): any => {
    if (Array.isArray(node)) return node.map(resolve);
    if (!node || typeof node !== 'object') return node;
    if (typeof node.$ref === 'string' && node.$ref.startsWith('#/components/schemas/')) {
      const name = node.$ref.slice('#/components/schemas/'.length);
      inlined.add(name);
      return resolve(structuredClone(schemas[name]));
    }
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, resolve(v)]));
  };
  for (const ops of Object.values<Json>(doc.paths ?? {})) {
    for (const op of Object.values<Json>(ops)) {
      for (const media of Object.values<Json>(op?.requestBody?.content ?? {})) media.schema = resolve(media.schema);
    }
  }
  const stillUsed = JSON.stringify({ paths: doc.paths, components: { ...doc.components, schemas: undefined } }) + JSON.stringify(Object.fromEntries(Object.entries(schemas).filter(([n]) => !inlined.has(n))));
  for (const name of inlined) if (!stillUsed.includes(`"#/components/schemas/${name}"`)) delete schemas[name];
}
