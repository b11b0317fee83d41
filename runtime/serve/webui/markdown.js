// runtime/serve/webui/markdown.js — a small, safe Markdown renderer for the model's answers.
//
// Safety: the text is HTML-escaped first, whole; the renderer then only adds its own tags around the
// escaped text, and a link's address must be http(s) (anything else stays text).  So nothing the model
// writes can become markup, a script or an attribute of its choosing.
// What it knows: fenced code blocks (```lang), inline code, **bold**, *italic*, # headings, - / * / 1.
// lists, > quotes, [links](https://...), paragraphs and line breaks.  An unfinished fence (text still
// streaming in) is shown as code so far.

export function escapeHtml(s) {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

// Inline spans of one escaped line: code first (its content is left alone), then links, bold, italic.
function inline(escaped) {
  const parts = escaped.split(/(`[^`]+`)/);
  return parts.map((p, i) => {
    if (i % 2 === 1) return '<code>' + p.slice(1, -1) + '</code>';
    return p
      .replace(/\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g,
        '<a href="$2" rel="noopener noreferrer nofollow" target="_blank">$1</a>')
      .replace(/\*\*([^*]+)\*\*/g, '<strong>$1</strong>')
      .replace(/(^|[^*\w])\*([^*\s][^*]*?)\*(?!\w)/g, '$1<em>$2</em>')
      .replace(/(^|[^\w])_([^_\s][^_]*?)_(?!\w)/g, '$1<em>$2</em>');
  }).join('');
}

function codeBlock(lang, lines) {
  const cls = lang ? ' class="lang-' + lang.replace(/[^\w+-]/g, '') + '"' : '';
  return '<div class="code"><div class="code-head"><span>' + (lang || 'code') +
    '</span><button type="button" class="copy" data-copy="code">Copy</button></div><pre><code' + cls + '>' +
    lines.join('\n') + '</code></pre></div>';
}

// Markdown text -> HTML (a string built only from escaped text and the tags above).
export function renderMarkdown(text) {
  const lines = escapeHtml(text).split('\n');
  const out = [];
  let para = [], list = null, quote = [];
  const flushPara = () => { if (para.length) out.push('<p>' + para.map(inline).join('<br>') + '</p>'); para = []; };
  const flushList = () => {
    if (list) out.push('<' + list.tag + '>' + list.items.map((x) => '<li>' + inline(x) + '</li>').join('') + '</' + list.tag + '>');
    list = null;
  };
  const flushQuote = () => { if (quote.length) out.push('<blockquote>' + quote.map(inline).join('<br>') + '</blockquote>'); quote = []; };
  const flush = () => { flushPara(); flushList(); flushQuote(); };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^\s*```\s*([\w+#.-]*)\s*$/);
    if (fence) {
      flush();
      const code = [];
      for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) code.push(lines[i]);
      out.push(codeBlock(fence[1], code));
      continue;
    }
    let m;
    if (/^\s*$/.test(line)) { flush(); continue; }
    if ((m = line.match(/^(#{1,6})\s+(.*)$/))) {
      flush();
      const n = Math.min(m[1].length + 2, 6);   // the page's own h1/h2 stay above an answer's headings
      out.push('<h' + n + '>' + inline(m[2]) + '</h' + n + '>');
      continue;
    }
    if ((m = line.match(/^\s*([-*+]|\d+[.)])\s+(.*)$/))) {
      flushPara(); flushQuote();
      const tag = /\d/.test(m[1]) ? 'ol' : 'ul';
      if (list && list.tag !== tag) flushList();
      if (!list) list = { tag, items: [] };
      list.items.push(m[2]);
      continue;
    }
    if ((m = line.match(/^&gt;\s?(.*)$/))) { flushPara(); flushList(); quote.push(m[1]); continue; }
    if (list && /^\s+\S/.test(line)) { list.items[list.items.length - 1] += ' ' + line.trim(); continue; }
    flushList(); flushQuote();
    para.push(line);
  }
  flush();
  return out.join('');
}
