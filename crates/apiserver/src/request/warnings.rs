//! `Warning` response headers, as kube-apiserver's warning recorder writes them:
//! `299 - "<text>"`, one header per distinct text.

use axum::http::HeaderValue;
use axum::http::header::WARNING;
use axum::response::Response;

/// The longest total of warning text kube-apiserver sends before it shortens each warning.
const TOTAL_LIMIT: usize = 4096;
/// What each warning is cut to once the total is over [`TOTAL_LIMIT`].
const EACH_LIMIT: usize = 256;

/// Adds `warnings` to `response`, dropping repeats.
pub fn add_warnings(response: &mut Response, warnings: &[String]) {
    let mut distinct: Vec<&str> = Vec::new();
    for warning in warnings {
        if !distinct.contains(&warning.as_str()) {
            distinct.push(warning);
        }
    }
    let total: usize = distinct.iter().map(|text| text.chars().count()).sum();
    for text in distinct {
        let text: String = if total > TOTAL_LIMIT {
            text.chars().take(EACH_LIMIT).collect()
        } else {
            text.to_string()
        };
        if let Ok(value) = HeaderValue::from_str(&header_text(&text)) {
            response.headers_mut().append(WARNING, value);
        }
    }
}

/// `299 - "<text>"` with `"` and `\` escaped, and anything that cannot go in a header dropped.
fn header_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str("299 - \"");
    for character in text.chars() {
        match character {
            '"' | '\\' => {
                out.push('\\');
                out.push(character);
            }
            ' '..='~' => out.push(character),
            _ => {}
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_quoted_once_each() {
        let mut response = Response::new(axum::body::Body::empty());
        add_warnings(
            &mut response,
            &[
                "unknown field \"spec.foo\"".to_string(),
                "unknown field \"spec.foo\"".to_string(),
                "a\\b".to_string(),
            ],
        );
        let values: Vec<_> = response.headers().get_all(WARNING).iter().collect();
        assert_eq!(
            values,
            [
                "299 - \"unknown field \\\"spec.foo\\\"\"",
                "299 - \"a\\\\b\""
            ]
        );
    }
}
