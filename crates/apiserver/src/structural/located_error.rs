//! cel-go's way of showing a compile error: `ERROR: <input>:line:column: message`, then the
//! expression's line with a caret under the column (columns count characters, from 1).

use cel::Program;

/// The error `text` at the node `id` of `program`, as cel-go shows it.
pub fn located(program: &Program, id: u64, text: &str) -> String {
    let info = program.source_info();
    let source = info.source.as_str();
    let offset = info
        .offset_for(id)
        .map_or(0, |(start, _)| start as usize)
        .min(source.len());
    let before = source.get(..offset).unwrap_or_default();
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    let column = before[line_start..].chars().count();
    let line_text = source[line_start..].lines().next().unwrap_or_default();
    format!(
        "ERROR: <input>:{line}:{}: {text}\n | {line_text}\n | {}^",
        column + 1,
        ".".repeat(column)
    )
}
