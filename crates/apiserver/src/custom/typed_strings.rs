//! The strings of a schema's formats that CEL rules see as values of their own type, as
//! kube-apiserver types them: `date-time` and `date` as `timestamp`, `duration` as `duration`,
//! `byte` as `bytes` (apiserver's `pkg/cel/common`, read with go-openapi's parsers).

use base64::Engine;
use cel::Value as CelValue;
use chrono::{DateTime, FixedOffset, TimeDelta};

/// `text` as the CEL value its `format` makes it; `None` for a format CEL types as a string,
/// or a text that is not of its format (a value the schema check refuses before any rule runs,
/// or one kept unchanged under ratcheting: the rule sees the string). The schema's format
/// check ([`formats`](super::formats)) reads these formats with the same functions, so what
/// it accepts is typed here.
pub(crate) fn typed(format: &str, text: &str) -> Option<CelValue> {
    match format {
        "date-time" => date_time(text).map(CelValue::Timestamp),
        "date" => date(text).map(CelValue::Timestamp),
        "duration" => duration(text).map(CelValue::Duration),
        "byte" => bytes(text).map(|bytes| CelValue::Bytes(std::sync::Arc::new(bytes))),
        _ => None,
    }
}

/// An instant in UTC as chrono has it.
fn utc(timestamp: jiff::Timestamp) -> Option<DateTime<FixedOffset>> {
    DateTime::from_timestamp(
        timestamp.as_second(),
        timestamp.subsec_nanosecond().unsigned_abs(),
    )
    .map(|time| time.fixed_offset())
}

/// RFC 3339, or its date and time without an offset (read as UTC).
pub(crate) fn date_time(text: &str) -> Option<DateTime<FixedOffset>> {
    let instant = text.parse::<jiff::Timestamp>().ok().or_else(|| {
        text.parse::<jiff::civil::DateTime>()
            .ok()
            .and_then(|civil| civil.to_zoned(jiff::tz::TimeZone::UTC).ok())
            .map(|zoned| zoned.timestamp())
    })?;
    utc(instant)
}

/// A full date (`2024-01-02`), as its midnight in UTC.
pub(crate) fn date(text: &str) -> Option<DateTime<FixedOffset>> {
    if text.len() != 10 {
        return None;
    }
    let midnight = text
        .parse::<jiff::civil::Date>()
        .ok()?
        .to_zoned(jiff::tz::TimeZone::UTC)
        .ok()?;
    utc(midnight.timestamp())
}

/// Standard base64.
pub(crate) fn bytes(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

/// Go's `time.ParseDuration` (`1h30m`, `-1.5s`, `0`), or go-openapi's `<n> <unit>` form
/// (`3 days`, `2w`).
pub(crate) fn duration(text: &str) -> Option<TimeDelta> {
    go_duration(text).or_else(|| unit_duration(text))
}

/// Nanoseconds per unit of Go's `time.ParseDuration`.
fn go_unit(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// Go's `time.ParseDuration`, step for step: each term's whole part in integers, its fraction
/// as Go computes it, the total within Go's int64 nanoseconds.
pub(crate) fn go_duration(text: &str) -> Option<TimeDelta> {
    const LIMIT: u64 = 1 << 63;
    let (negative, mut rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Some(TimeDelta::zero());
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        // The whole part.
        let whole_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let mut whole: u64 = 0;
        for digit in rest[..whole_end].bytes() {
            whole = whole
                .checked_mul(10)?
                .checked_add(u64::from(digit - b'0'))
                .filter(|value| *value <= LIMIT)?;
        }
        rest = &rest[whole_end..];
        // The fraction: its digits as an integer (those past its range ignored, as Go does)
        // and their scale.
        let (mut fraction, mut scale, mut has_fraction) = (0_u64, 1.0_f64, false);
        if let Some(after_dot) = rest.strip_prefix('.') {
            let fraction_end = after_dot
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(after_dot.len());
            let mut overflow = false;
            for digit in after_dot[..fraction_end].bytes() {
                has_fraction = true;
                if overflow || fraction > (LIMIT - 1) / 10 {
                    overflow = true;
                    continue;
                }
                fraction = fraction * 10 + u64::from(digit - b'0');
                scale *= 10.0;
            }
            rest = &after_dot[fraction_end..];
        }
        if whole_end == 0 && !has_fraction {
            return None; // no digits
        }
        let unit_end = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = go_unit(&rest[..unit_end])?;
        rest = &rest[unit_end..];
        let mut term = whole.checked_mul(unit).filter(|value| *value <= LIMIT)?;
        if fraction > 0 {
            // Go's own float step: nanosecond accurate for fractions of hours.
            term = term
                .checked_add((fraction as f64 * (unit as f64 / scale)) as u64)
                .filter(|value| *value <= LIMIT)?;
        }
        total = total.checked_add(term).filter(|value| *value <= LIMIT)?;
    }
    let nanos = if negative {
        // -2^63 is an int64; 2^63 is not.
        0_i64.checked_sub_unsigned(total)?
    } else {
        i64::try_from(total).ok()?
    };
    Some(TimeDelta::nanoseconds(nanos))
}

/// go-openapi's `<n><space?><unit>`, with the unit names listed.
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
        // Go's arithmetic, exactly.
        assert_eq!(nanos("1.001s"), 1_001_000_000);
        assert_eq!(nanos("1.000001s"), 1_000_001_000);
        assert_eq!(nanos("0.00000003s"), 30);
        assert_eq!(nanos("1h1.5m"), 3_690_000_000_000);
        assert_eq!(nanos("-2562047h47m16.854775808s"), i64::MIN);
        assert!(
            typed("duration", "2562047h47m16.854775808s").is_none(),
            "past int64"
        );
        assert!(
            typed("duration", "1h-30m").is_none(),
            "a sign only in front"
        );
        assert!(typed("duration", ".s").is_none());
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
