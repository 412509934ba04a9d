//! kube's URL functions: `url`, `isURL`, and `getScheme`, `getHost`, `getHostname`,
//! `getPort`, `getEscapedPath`, `getQuery` on a URL. Text is a URL when Go's
//! `url.ParseRequestURI` takes it: an absolute URL, or an absolute path.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::types::{STRING_TYPE, Type};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, Value};

use super::{Outcome, error, opaque_arg, overload, string_arg};
use crate::custom::formats::is_valid;

const TYPE_NAME: &str = "kubernetes.URL";

/// A URL's parts, as given (still escaped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    scheme: String,
    host: String,
    path: String,
    query: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

impl Url {
    fn parse(text: &str) -> Option<Self> {
        if is_valid("uri", text) != Some(true) {
            return None;
        }
        let text = text.split_once('#').map_or(text, |(before, _)| before);
        let (rest, query) = text.split_once('?').unwrap_or((text, ""));
        let (scheme, rest) = match rest.starts_with('/') {
            true => ("", rest),
            false => rest.split_once(':')?,
        };
        let (host, path) = match rest.strip_prefix("//") {
            Some(authority) => {
                let end = authority.find('/').unwrap_or(authority.len());
                let host = &authority[..end];
                (
                    host.rsplit_once('@').map_or(host, |(_, host)| host),
                    &authority[end..],
                )
            }
            None => ("", rest),
        };
        Some(Self {
            scheme: scheme.to_string(),
            host: host.to_string(),
            path: path.to_string(),
            query: query.to_string(),
        })
    }

    /// The host without its port (and without the brackets of an IPv6 address).
    fn hostname(&self) -> &str {
        match self.host.strip_prefix('[') {
            Some(bracketed) => bracketed
                .split_once(']')
                .map_or(bracketed, |(inside, _)| inside),
            None => self
                .host
                .split_once(':')
                .map_or(&self.host, |(name, _)| name),
        }
    }

    fn port(&self) -> &str {
        let after = match self.host.rfind(']') {
            Some(close) => &self.host[close + 1..],
            None => &self.host,
        };
        after.rsplit_once(':').map_or("", |(_, port)| port)
    }
}

/// `text` with `+` read as a space and `%XX` decoded, as Go's `url.ParseQuery` reads it.
fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'+' => out.push(b' '),
            b'%' => match text
                .get(at + 1..at + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
            {
                Some(decoded) => {
                    out.push(decoded);
                    at += 2;
                }
                None => out.push(byte),
            },
            _ => out.push(byte),
        }
        at += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn text(value: &str) -> Value {
    Value::String(Arc::new(value.to_string()))
}

fn part(name: &str, args: &[Value], get: fn(&Url) -> &str) -> Outcome {
    Ok(text(get(opaque_arg::<Url>(name, args, 0)?)))
}

pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    overload!(url, "url", |name, args| {
        let source = string_arg(name, args, 0)?;
        Url::parse(source).map(|url| Value::Opaque(Arc::new(url))).ok_or_else(|| {
            error(name, format!("URL parse error during conversion from string: parse {source:?}: invalid URI for request"))
        })
    });
    overload!(is_url, "isURL", |name, args| Ok(Value::Bool(
        Url::parse(string_arg(name, args, 0)?).is_some()
    )));
    overload!(scheme, "getScheme", |name, args| part(name, args, |url| {
        &url.scheme
    }));
    overload!(host, "getHost", |name, args| part(name, args, |url| &url
        .host));
    overload!(hostname, "getHostname", |name, args| part(
        name,
        args,
        Url::hostname
    ));
    overload!(port, "getPort", |name, args| part(name, args, Url::port));
    overload!(path, "getEscapedPath", |name, args| part(
        name,
        args,
        |url| &url.path
    ));
    overload!(query, "getQuery", |name, args| {
        let url = opaque_arg::<Url>(name, args, 0)?;
        let mut values: HashMap<String, Vec<Value>> = HashMap::new();
        for pair in url.query.split(['&', ';']).filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            values
                .entry(unescape(key))
                .or_default()
                .push(text(&unescape(value)));
        }
        let map: HashMap<String, Value> = values
            .into_iter()
            .map(|(key, list)| (key, Value::List(Arc::new(list))))
            .collect();
        Ok(Value::from(map))
    });
    let url_type = || Type::new_opaque_type(TYPE_NAME);
    env.add_overload("url", "string_to_url", vec![STRING_TYPE], url)?;
    env.add_overload("isURL", "is_url_string", vec![STRING_TYPE], is_url)?;
    for (function, id, body) in [
        (
            "getScheme",
            "url_get_scheme",
            scheme as cel::common::functions::Function,
        ),
        ("getHost", "url_get_host", host),
        ("getHostname", "url_get_hostname", hostname),
        ("getPort", "url_get_port", port),
        ("getEscapedPath", "url_get_escaped_path", path),
        ("getQuery", "url_get_query", query),
    ] {
        env.add_member_overload(function, id, url_type(), vec![], body)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_true, eval};

    #[test]
    fn url_functions_answer_as_kube_does() {
        assert_true(&[
            "isURL('https://example.com:8080/a/b?x=1')",
            "isURL('/absolute/path')",
            "!isURL('relative/path')",
            "!isURL('')",
            "url('https://example.com:8080/a').getScheme() == 'https'",
            "url('https://example.com:8080/a').getHost() == 'example.com:8080'",
            "url('https://example.com:8080/a').getHostname() == 'example.com'",
            "url('https://[::1]:80/').getHostname() == '::1'",
            "url('https://[::1]:80/').getPort() == '80'",
            "url('https://example.com').getPort() == ''",
            "url('https://example.com/a%20b').getEscapedPath() == '/a%20b'",
            "url('https://example.com/?k=v&k=w&e=a+b').getQuery() == {'k': ['v', 'w'], 'e': ['a b']}",
        ]);
        assert!(
            eval("url('nope')")
                .unwrap_err()
                .contains("URL parse error during conversion from string")
        );
    }
}
