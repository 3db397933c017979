/**
 * The one DOM helper of the demo: `element` builds a node with attributes and children.
 *
 * Owns: `element`. Never: parses HTML: text always goes in as text nodes, so nothing a peer
 * sends can become markup.
 */

/** Attributes set with `setAttribute`; `class` and `data-*` included. */
export type Attributes = Readonly<Record<string, string>>;

/** A new `tag` with `attributes` and `children` (strings become text nodes). */
export function element<Tag extends keyof HTMLElementTagNameMap>(
  tag: Tag,
  attributes: Attributes = {},
  ...children: ReadonlyArray<Node | string>
): HTMLElementTagNameMap[Tag] {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  node.append(...children);
  return node;
}
