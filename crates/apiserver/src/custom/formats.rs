//! The string formats a custom resource schema may name, checked as kube-openapi's `strfmt`
//! registry checks them. Names are compared without dashes (`date-time` is `datetime`), as
//! go-openapi normalizes them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use regex::Regex;

use super::typed_strings;
use crate::storage::meta::{is_dns1035_label, is_dns1123_subdomain};

/// Whether `text` is of `format`; `None` for a format kube does not check (it strips those
/// from the schema it validates with).
pub fn is_valid(format: &str, text: &str) -> Option<bool> {
    let normalized = format.replace('-', "");
    let valid = match normalized.as_str() {
        "password" => true,
        "bsonobjectid" => text.len() == 24 && text.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => is_request_uri(text),
        "email" => is_email(text),
        "hostname" => is_hostname(text),
        "ipv4" => text.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => text.contains(':') && text.parse::<Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(text),
        "mac" => is_mac(text),
        "uuid" => UUID.is_match(text),
        "uuid3" => UUID3.is_match(text),
        "uuid4" => UUID4.is_match(text),
        "uuid5" => UUID5.is_match(text),
        "hexcolor" => HEX_COLOR.is_match(text),
        "rgbcolor" => RGB_COLOR.is_match(text),
        "ssn" => SSN.is_match(text),
        // The formats CEL rules see typed are read by the same functions that type them.
        "byte" => typed_strings::bytes(text).is_some(),
        "date" => typed_strings::date(text).is_some(),
        "datetime" => typed_strings::date_time(text).is_some(),
        "duration" => typed_strings::duration(text).is_some(),
        "k8sshortname" => text.len() <= 63 && is_dns1035_label(text),
        "k8slongname" => is_dns1123_subdomain(text),
        _ => return None,
    };
    Some(valid)
}

/// `source` compiled (the sources below are constants that compile).
fn compiled(source: &str) -> Regex {
    Regex::new(source).unwrap_or_else(|_| never_matches())
}

/// A regular expression that matches nothing (a fallback that never runs).
fn never_matches() -> Regex {
    Regex::new("[^\\s\\S]").unwrap_or_else(|_| unreachable!("a constant expression compiles"))
}

static UUID: LazyLock<Regex> = LazyLock::new(|| {
    compiled("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID3: LazyLock<Regex> = LazyLock::new(|| {
    compiled("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID4: LazyLock<Regex> = LazyLock::new(|| {
    compiled("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static UUID5: LazyLock<Regex> = LazyLock::new(|| {
    compiled("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static HEX_COLOR: LazyLock<Regex> =
    LazyLock::new(|| compiled("^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGB_COLOR: LazyLock<Regex> = LazyLock::new(|| {
    compiled(
        "^rgb\\(\\s*(0|[1-9]\\d?|1\\d\\d?|2[0-4]\\d|25[0-5])\\s*,\\s*(0|[1-9]\\d?|1\\d\\d?|2[0-4]\\d|25[0-5])\\s*,\\s*(0|[1-9]\\d?|1\\d\\d?|2[0-4]\\d|25[0-5])\\s*\\)$",
    )
});
static SSN: LazyLock<Regex> = LazyLock::new(|| compiled("^\\d{3}[- ]?\\d{2}[- ]?\\d{4}$"));
/// Go's `url.ParseRequestURI`: an absolute URI or an absolute path, without spaces.
fn is_request_uri(text: &str) -> bool {
    if text.is_empty() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    if text.starts_with('/') {
        return true;
    }
    let Some((scheme, _)) = text.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// An address as Go's `mail.ParseAddress` reads one, simplified: `[name <]local@domain[>]`.
fn is_email(text: &str) -> bool {
    let address = match (text.rfind('<'), text.strip_suffix('>')) {
        (Some(open), Some(inner)) => &inner[open + 1..],
        _ => text,
    };
    let Some((local, domain)) = address.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.is_empty()
        && !address.chars().any(char::is_whitespace)
        && !domain.starts_with('.')
        && !domain.ends_with('.')
}

/// A host name of RFC 1034 (letters, digits and dashes in labels of at most 63 characters).
fn is_hostname(text: &str) -> bool {
    text.len() <= 255
        && !text.is_empty()
        && text.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_alphanumeric() || c == '-')
        })
}

fn is_cidr(text: &str) -> bool {
    let Some((address, prefix)) = text.split_once('/') else {
        return false;
    };
    let Ok(prefix) = prefix.parse::<u8>() else {
        return false;
    };
    match address.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => prefix <= 32,
        Ok(IpAddr::V6(_)) => prefix <= 128,
        Err(_) => false,
    }
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets as `xx:xx…`, `xx-xx…` or `xxxx.xxxx…`.
fn is_mac(text: &str) -> bool {
    // Groups of `width` hex digits, as many as one of `counts`, split by `separator`.
    let groups = |separator: char, counts: [usize; 3], width: usize| {
        let groups: Vec<&str> = text.split(separator).collect();
        counts.contains(&groups.len())
            && groups
                .iter()
                .all(|group| group.len() == width && group.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    groups(':', [6, 8, 20], 2) || groups('-', [6, 8, 20], 2) || groups('.', [3, 4, 10], 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_accept_and_refuse_as_strfmt_does() {
        for (format, good, bad) in [
            ("date-time", "2024-01-02T03:04:05Z", "yesterday"),
            ("date", "2024-02-29", "2023-02-29"),
            ("uuid", "8c1b5f4e-1c2d-4e5f-9a0b-1c2d3e4f5a6b", "8c1b5f4e"),
            ("ipv4", "10.0.0.1", "10.0.0.256"),
            ("ipv6", "fe80::1", "10.0.0.1"),
            ("cidr", "10.0.0.0/8", "10.0.0.0/33"),
            ("mac", "01:23:45:67:89:ab", "01:23:45"),
            ("byte", "aGVsbG8=", "not base64!"),
            ("hostname", "example.com", "-bad-.com"),
            ("email", "a@example.com", "nobody"),
            ("uri", "https://example.com/x", "relative/path"),
            ("duration", "1h30m", "soon"),
            ("k8s-short-name", "web-1", "Web_1"),
        ] {
            assert_eq!(is_valid(format, good), Some(true), "{format} {good}");
            assert_eq!(is_valid(format, bad), Some(false), "{format} {bad}");
        }
        assert_eq!(is_valid("made-up", "anything"), None);
    }
}
