//! The strings of a schema's formats that CEL rules see as values of their own type, as
//! kube-apiserver types them: `date-time` and `date` as `timestamp`, `duration` as `duration`,
//! `byte` as `bytes` (apiserver's `pkg/cel/common`, read with go-openapi's parsers).

use base64::Engine;
use cel::Value as CelValue;
use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, TimeDelta};

/// `text` as the CEL value its `format` makes it; `None` for a format CEL types as a string,
/// or a text that is not of its format (a value the schema check refuses before any rule runs,
/// or one kept unchanged under ratcheting: the rule sees the string).
pub(crate) fn typed(format: &str, text: &str) -> Option<CelValue> {
    match format {
        "date-time" => date_time(text).map(CelValue::Timestamp),
        "date" => NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .ok()
            .and_then(|date| date.and_hms_opt(0, 0, 0))
            .map(|midnight| CelValue::Timestamp(midnight.and_utc().fixed_offset())),
        "duration" => duration(text).map(CelValue::Duration),
        "byte" => base64::engine::general_purpose::STANDARD
            .decode(text)
            .ok()
            .map(|bytes| CelValue::Bytes(std::sync::Arc::new(bytes))),
        _ => None,
    }
}

/// RFC 3339, or its date and time without an offset (read as UTC), as go-openapi accepts.
fn date_time(text: &str) -> Option<DateTime<FixedOffset>> {
    DateTime::parse_from_rfc3339(text).ok().or_else(|| {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
            .ok()
            .map(|time| time.and_utc().fixed_offset())
    })
}

/// Go's `time.ParseDuration` (`1h30m`, `-1.5s`, `0`), or go-openapi's `<n> <unit>` form
/// (`3 days`, `2w`).
fn duration(text: &str) -> Option<TimeDelta> {
    if text == "0" {
        return Some(TimeDelta::zero());
    }
    go_duration(text).or_else(|| unit_duration(text))
}

/// Nanoseconds per unit of Go's `time.ParseDuration`.
fn go_unit(unit: &str) -> Option<f64> {
    Some(match unit {
        "ns" => 1.0,
        "us" | "µs" | "μs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        _ => return None,
    })
}

fn go_duration(text: &str) -> Option<TimeDelta> {
    let (negative, mut rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if rest.is_empty() {
        return None;
    }
    let mut nanos = 0.0_f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        nanos += number * go_unit(&rest[..unit_end])?;
        rest = &rest[unit_end..];
    }
    let nanos = if negative { -nanos } else { nanos };
    // Go's durations are int64 nanoseconds: beyond, the text is not a duration.
    (nanos.abs() < 9.223_372_036_854_775e18).then(|| TimeDelta::nanoseconds(nanos as i64))
}

/// go-openapi's `<n><space?><unit>` with its unit names.
fn unit_duration(text: &str) -> Option<TimeDelta> {
    let digits_end = text.find(|c: char| !c.is_ascii_digit())?;
    let count: i64 = text[..digits_end].parse().ok()?;
    let unit = text[digits_end..].trim_start();
    let seconds: i64 = match unit {
        "ns" | "nanosecond" | "nanoseconds" => return Some(TimeDelta::nanoseconds(count)),
        "us" | "µs" | "microsecond" | "microseconds" => {
            return Some(TimeDelta::microseconds(count));
        }
        "ms" | "millisecond" | "milliseconds" => return TimeDelta::try_milliseconds(count),
        "s" | "second" | "seconds" => 1,
        "m" | "minute" | "minutes" => 60,
        "h" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        "w" | "week" | "weeks" => 604_800,
        _ => return None,
    };
    TimeDelta::try_seconds(count.checked_mul(seconds)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_reads_as_kube_types_it() {
        let timestamp = |text: &str| match typed("date-time", text) {
            Some(CelValue::Timestamp(time)) => time.timestamp(),
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(timestamp("2024-01-02T03:04:05Z"), 1_704_164_645);
        assert_eq!(timestamp("2024-01-02T04:04:05+01:00"), 1_704_164_645);
        assert_eq!(timestamp("2024-01-02T03:04:05"), 1_704_164_645);
        assert!(
            matches!(typed("date", "2024-01-02"), Some(CelValue::Timestamp(time)) if time.timestamp() == 1_704_153_600)
        );
        let nanos = |text: &str| match typed("duration", text) {
            Some(CelValue::Duration(duration)) => duration.num_nanoseconds().unwrap(),
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(nanos("1h30m"), 5_400_000_000_000);
        assert_eq!(nanos("-1.5s"), -1_500_000_000);
        assert_eq!(nanos("0"), 0);
        assert_eq!(nanos("3 days"), 259_200_000_000_000);
        assert_eq!(nanos("2w"), 1_209_600_000_000_000);
        assert!(
            matches!(typed("byte", "aGVsbG8="), Some(CelValue::Bytes(bytes)) if bytes.as_slice() == b"hello")
        );
        for (format, text) in [
            ("date-time", "yesterday"),
            ("duration", "soon"),
            ("duration", "1x"),
            ("byte", "not base64!"),
            ("email", "a@b.c"),
        ] {
            assert!(typed(format, text).is_none(), "{format} {text}");
        }
    }
}
