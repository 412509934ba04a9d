//! cel-go's way of showing a compile error: `ERROR: <input>:line:column: message`, then the
//! expression's line (tabs as spaces) with a caret under the column (columns count characters,
//! from 1; a character of more than one byte is marked with a wide dot or caret). A line
//! longer than 16,384 bytes is not shown.

use cel::Program;

/// The longest line shown under the error, in bytes (cel-go's `maxSnippetLength`).
const MAX_SNIPPET: usize = 16_384;

/// The error `text` at the node `id` of `program`, as cel-go shows it.
pub fn located(program: &Program, id: u64, text: &str) -> String {
    let info = program.source_info();
    let source = info.source.as_str();
    let mut offset = info
        .offset_for(id)
        .map_or(0, |(start, _)| start as usize)
        .min(source.len());
    while !source.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    let column = before[line_start..].chars().count();
    let mut shown = format!("ERROR: <input>:{line}:{}: {text}", column + 1);
    let snippet = source[line_start..].lines().next().unwrap_or_default();
    if snippet.len() <= MAX_SNIPPET {
        let snippet = snippet.replace('\t', " ");
        let mut marks = snippet.chars();
        let mut marker: String = marks
            .by_ref()
            .take(column)
            .map(|c| if c.len_utf8() > 1 { '\u{ff0e}' } else { '.' })
            .collect();
        marker.push(match marks.next() {
            Some(c) if c.len_utf8() > 1 => '\u{ff3e}',
            _ => '^',
        });
        shown.push_str(&format!("\n | {snippet}\n | {marker}"));
    }
    shown
}
