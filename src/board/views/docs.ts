import { Html, html, join, type Part } from '../html.ts';
import { GUIDE_LINK } from '../../domain/guides.ts';
import { page } from './layout.ts';

/** A hint as HTML: its text escaped, every guide path in it (see domain/guides.ts) a link to that page on this server. */
export function hintWithLinks(hint: string): Html {
  const parts: Part[] = [];
  let at = 0;
  for (const m of hint.matchAll(GUIDE_LINK)) {
    parts.push(hint.slice(at, m.index), html`<a href="${m[0]}">${m[0]}</a>`);
    at = m.index + m[0].length;
  }
  parts.push(hint.slice(at));
  return join(parts);
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
export const headingId = (text: string) =>
  text
    .toLowerCase()
    .replace(/[^a-z0-9 _-]/g, '')
    .replace(/ /g, '-');

const SAFE_HREF = /^(#[\w-]+|\/(?!\/)[\w/.#-]*|https?:\/\/[^\s"<>]+)$/;

/** `code`, **bold** and [text](href) inside one block; every other character is text. */
function inline(text: string): Html {
  const parts: Part[] = [];
  let at = 0;
  for (const m of text.matchAll(/`([^`]+)`|\*\*(.+?)\*\*|\[([^\]]+)\]\(([^)\s]+)\)/g)) {
    parts.push(text.slice(at, m.index));
    if (m[1] !== undefined) parts.push(html`<code>${m[1]}</code>`);
    else if (m[2] !== undefined) parts.push(html`<strong>${inline(m[2])}</strong>`);
    else parts.push(SAFE_HREF.test(m[4]!) ? html`<a href="${m[4]!}">${inline(m[3]!)}</a>` : inline(m[3]!));
    at = m.index + m[0].length;
  }
  parts.push(text.slice(at));
  return join(parts);
}

interface Item {
  indent: number;
  ordered: boolean;
  text: string;
  children: Item[];
}

const list = (items: Item[]): Html => {
  const li = items.map((i) => html`<li>${inline(i.text)}${i.children.length ? list(i.children) : ''}</li>`);
  return items[0]!.ordered ? html`<ol>${li}</ol>` : html`<ul>${li}</ul>`;
};

/**
 * The Markdown our own guides use, and no more: headings, paragraphs, fenced code, nested lists
 * (a more indented line continues its item) and the inline forms above. Everything is escaped.
 */
export function renderGuide(markdown: string): { title: string; body: Html } {
  const blocks: Html[] = [];
  let title = 'Guide';
  let paragraph: string[] = [];
  let roots: Item[] = [];
  let stack: Item[] = [];
  let code: string[] | null = null;
  const flush = () => {
    if (paragraph.length) blocks.push(html`<p>${inline(paragraph.join(' '))}</p>`);
    if (roots.length) blocks.push(list(roots));
    paragraph = [];
    roots = [];
    stack = [];
  };
  for (const line of markdown.split('\n')) {
    if (code) {
      if (line.startsWith('```')) {
        blocks.push(html`<pre><code>${code.join('\n')}</code></pre>`);
        code = null;
      } else code.push(line);
      continue;
    }
    const heading = /^(#{1,3}) (.+)$/.exec(line);
    const item = /^( *)(-|\d+\.) (.*)$/.exec(line);
    if (line.startsWith('```')) {
      flush();
      code = [];
    } else if (line.trim() === '') flush();
    else if (heading) {
      flush();
      const level = heading[1]!.length;
      if (level === 1) title = heading[2]!;
      const tag = `h${level}`;
      blocks.push(new Html(`<${tag} id="${headingId(heading[2]!)}">${inline(heading[2]!).value}</${tag}>`));
    } else if (item && paragraph.length === 0) {
      const next: Item = { indent: item[1]!.length, ordered: item[2] !== '-', text: item[3]!, children: [] };
      while (stack.length && stack.at(-1)!.indent >= next.indent) stack.pop();
      (stack.length ? stack.at(-1)!.children : roots).push(next);
      stack.push(next);
    } else if (stack.length && line.startsWith(' ')) stack.at(-1)!.text += ` ${line.trim()}`;
    else paragraph.push(line.trim());
  }
  flush();
  return { title, body: html`<article class="guide">${blocks}</article>` };
}

/** A guide as a board page (no session: the guide is public). */
export function guidePage(markdown: string): string {
  const { title, body } = renderGuide(markdown);
  return page({ title }, body);
}
