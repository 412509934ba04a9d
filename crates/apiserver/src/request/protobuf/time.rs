//! The JSON forms of Kubernetes' time types: `Time` (RFC 3339 in seconds), `MicroTime` (six
//! fractional digits) and `Duration` (Go's `time.Duration` text, `1h2m3.5s`).

use serde_json::{Value, json};

/// A time as its JSON text; `null` when out of range.
pub(super) fn to_text(seconds: i64, nanos: i64, micro: bool) -> Value {
    let Ok(nanos) = i32::try_from(nanos) else {
        return Value::Null;
    };
    let Ok(time) = jiff::Timestamp::new(seconds, if micro { nanos } else { 0 }) else {
        return Value::Null;
    };
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    json!(time.strftime(format).to_string())
}

/// The seconds and nanoseconds of a time's JSON text.
pub(super) fn from_text(text: &str) -> Option<(i64, u32)> {
    let time: jiff::Timestamp = text.parse().ok()?;
    let nanos = u32::try_from(time.subsec_nanosecond()).ok()?;
    Some((time.as_second(), nanos))
}

/// Go's text of a duration of `nanos` nanoseconds: `0s`, `1.5s`, `2m0s`, `1h0m0s`, `300ms`.
pub(super) fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_string();
    }
    let negative = nanos < 0;
    let total = nanos.unsigned_abs();
    let sign = if negative { "-" } else { "" };
    if total < 1_000_000_000 {
        let (unit, scale) = if total < 1_000 {
            ("ns", 1)
        } else if total < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        return format!("{sign}{}{unit}", fraction(total, scale));
    }
    let hours = total / 3_600_000_000_000;
    let minutes = (total / 60_000_000_000) % 60;
    let seconds = fraction(total % 60_000_000_000, 1_000_000_000);
    match (hours, minutes) {
        (0, 0) => format!("{sign}{seconds}s"),
        (0, _) => format!("{sign}{minutes}m{seconds}s"),
        _ => format!("{sign}{hours}h{minutes}m{seconds}s"),
    }
}

/// `value / scale` with its fraction, trailing zeros dropped: `1500/1000` is `1.5`.
fn fraction(value: u64, scale: u64) -> String {
    let whole = value / scale;
    let rest = value % scale;
    if rest == 0 {
        return whole.to_string();
    }
    let digits = scale.ilog10() as usize;
    let text = format!("{whole}.{rest:0digits$}");
    text.trim_end_matches('0').to_string()
}

/// The nanoseconds of Go's text of a duration (`1h2m3.5s`, `300ms`, `-1.5h`).
pub(super) fn parse_go_duration(text: &str) -> Option<i64> {
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(0);
    }
    let mut total: f64 = 0.0;
    let mut any = false;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_end..];
        total += number * scale;
        any = true;
    }
    if !any || !total.is_finite() || total > i64::MAX as f64 {
        return None;
    }
    let nanos = total.round() as i64;
    Some(if negative { -nanos } else { nanos })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_and_write_as_go_does() {
        for (nanos, text) in [
            (0, "0s"),
            (1_500_000_000, "1.5s"),
            (120_000_000_000, "2m0s"),
            (3_600_000_000_000, "1h0m0s"),
            (300_000_000, "300ms"),
            (3_723_500_000_000, "1h2m3.5s"),
            (-5_000_000_000, "-5s"),
        ] {
            assert_eq!(go_duration(nanos), text);
            assert_eq!(parse_go_duration(text), Some(nanos), "{text}");
        }
        assert_eq!(parse_go_duration("5x"), None);
        assert_eq!(parse_go_duration(""), None);
    }

    #[test]
    fn times_in_seconds_and_micros() {
        assert_eq!(to_text(0, 0, false), json!("1970-01-01T00:00:00Z"));
        assert_eq!(
            to_text(1_700_000_000, 123_456_000, true),
            json!("2023-11-14T22:13:20.123456Z")
        );
        assert_eq!(
            from_text("2023-11-14T22:13:20.123456Z"),
            Some((1_700_000_000, 123_456_000))
        );
    }
}
